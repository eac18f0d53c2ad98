/** Small pieces every page uses: text from users, labelled fields, refusals, loading and empty states. */
import type { ComponentChildren, InputHTMLAttributes } from 'preact';
import { useEffect, useId, useRef, useState } from 'preact/hooks';
import { errorMessage } from './api.ts';

type InputProps = Omit<InputHTMLAttributes<HTMLInputElement>, 'label' | 'onInput' | 'value'> & {
  label: string;
  value: string;
  onValue: (value: string) => void;
  hint?: string;
};

/**
 * The explicit bidi overrides, LEFT-TO-RIGHT OVERRIDE (U+202D) and RIGHT-TO-LEFT OVERRIDE (U+202E):
 * they draw the letters after them in the forced direction, whatever their own, which is how a name
 * ending in "gnp.exe" reads "exe.png". They are the one bidi control that changes what Latin text
 * looks like, so they are shown as their code point instead of applied.
 */
const OVERRIDE = /([\u202D\u202E])/;
const OVERRIDES = /[\u202D\u202E]/g;

function codePoint(char: string): string {
  return `U+${char.codePointAt(0)!.toString(16).toUpperCase()}`;
}

/** `text` with its overrides written out as code points, for where only a string goes (the document's title). */
export function shownText(text: string): string {
  return text
    .split(OVERRIDE)
    .map((part, i) => (i % 2 ? codePoint(part) : part))
    .join('');
}

/**
 * `text` as `shownText`, between FIRST STRONG ISOLATE and POP DIRECTIONAL ISOLATE: the isolate of
 * `UserText` for text that goes where no element can (a select's options).
 */
export function isolatedText(text: string): string {
  return `\u2068${shownText(text)}\u2069`;
}

/**
 * Text someone else chose (a name, a title, a tag, a URL), rendered as text. Every such text goes
 * through here, so that none can change what is drawn around it: the <bdi> isolates its direction
 * (what it holds, right-to-left letters or bidi controls, reorders nothing outside it), an override
 * inside shows as its code point, and the text breaks anywhere rather than push its box wider
 * (styles.css, `.user-text`).
 */
export function UserText({ text, class: className }: { text: string; class?: string }) {
  const parts = text.split(OVERRIDE);
  return (
    <bdi class={className ? `user-text ${className}` : 'user-text'}>
      {parts.length === 1
        ? text
        : parts.map((part, i) =>
            i % 2 ? (
              <span key={i} class="bidi-mark" title="A bidirectional override character, shown rather than applied">
                {codePoint(part)}
              </span>
            ) : (
              part
            ),
          )}
    </bdi>
  );
}

/**
 * An emoji field: a marker meant to be one emoji, which may hold any 32 characters. It is drawn in
 * a box of fixed width that clips the rest (styles.css, `.emoji`), so a long one never covers the
 * text beside it; screen readers still read it all. Overrides are left out rather than shown: in
 * an isolated box one emoji wide they can reorder nothing anyone reads, and their mark would fill
 * the box. Without an emoji, `fallback`, hidden from screen readers.
 */
export function Emoji({ text, fallback = '', class: className }: { text: string | null | undefined; fallback?: string; class?: string }) {
  return (
    <span class={className ? `emoji ${className}` : 'emoji'} aria-hidden={text ? undefined : true}>
      {text ? <UserText text={text.replace(OVERRIDES, '')} /> : fallback}
    </span>
  );
}

/** An input with its label and, optionally, a hint tied to it. */
export function Field({ label, value, onValue, hint, ...rest }: InputProps) {
  const id = useId();
  const hintId = hint ? `${id}-hint` : undefined;
  return (
    <div class="field">
      <label for={id}>{label}</label>
      <input id={id} value={value} onInput={(e) => onValue(e.currentTarget.value)} aria-describedby={hintId} {...rest} />
      {hint && (
        <small id={hintId} class="hint">
          {hint}
        </small>
      )}
    </div>
  );
}

/** A refusal or failure, read out when it appears: the envelope's message. */
export function ErrorNote({ error }: { error: unknown }) {
  if (!error) return null;
  return (
    <p class="error" role="alert">
      {errorMessage(error)}
    </p>
  );
}

/** A success, read out politely. */
export function Notice({ children }: { children: ComponentChildren }) {
  return (
    <p class="notice" role="status">
      {children}
    </p>
  );
}

export function Loading({ what = 'Loading' }: { what?: string }) {
  return (
    <p class="loading" role="status" aria-live="polite">
      {what}…
    </p>
  );
}

export function Empty({ children }: { children: ComponentChildren }) {
  return <p class="empty">{children}</p>;
}

/** A form that runs `onSubmit` without reloading the page. */
export function Form({
  onSubmit,
  children,
  label,
  class: className,
}: {
  onSubmit: () => void;
  children: ComponentChildren;
  label?: string;
  class?: string;
}) {
  return (
    <form
      class={className ?? 'form'}
      aria-label={label}
      onSubmit={(e) => {
        e.preventDefault();
        onSubmit();
      }}
    >
      {children}
    </form>
  );
}

/** Whether the app has shown its first page: later pages are reached by navigating within it. */
let navigated = false;

/**
 * The page's title: the document's, and its heading. After a navigation within the app the heading
 * takes the focus (unless a field already has it), so screen readers say where the person arrived
 * and the next Tab starts from the page's top.
 */
export function PageTitle({ children, title }: { children: ComponentChildren; title: string }) {
  const ref = useRef<HTMLHeadingElement>(null);
  useEffect(() => {
    document.title = `${shownText(title)} · Signalboard`;
  }, [title]);
  useEffect(() => {
    if (!navigated) {
      navigated = true;
      return;
    }
    const active = document.activeElement;
    if (!(active instanceof HTMLInputElement || active instanceof HTMLSelectElement || active instanceof HTMLTextAreaElement))
      ref.current?.focus({ preventScroll: true });
  }, []);
  return (
    <h1 ref={ref} tabIndex={-1}>
      {children}
    </h1>
  );
}

/**
 * A PNG picked from disk, as the `data:image/png;base64,` URL the API takes, with a preview. Files
 * that are not PNG are refused here; the service checks the rest (size, dimensions).
 */
export function IconPicker({
  label,
  value,
  onValue,
  current,
}: {
  label: string;
  value: string | null;
  onValue: (dataUrl: string | null) => void;
  current?: string | null;
}) {
  const id = useId();
  const [problem, setProblem] = useState<string | null>(null);
  const shown = value ?? current ?? null;
  return (
    <div class="field icon-field">
      <label for={id}>{label}</label>
      <div class="icon-row">
        {shown ? (
          <img class="icon-preview" src={shown} alt="Icon preview" width={48} height={48} />
        ) : (
          <span class="icon-preview empty-icon" aria-hidden="true" />
        )}
        <input
          id={id}
          type="file"
          accept="image/png"
          onChange={(e) => {
            const file = e.currentTarget.files?.[0];
            setProblem(null);
            if (!file) return onValue(null);
            if (file.type !== 'image/png') {
              setProblem('The icon must be a PNG image.');
              e.currentTarget.value = '';
              return onValue(null);
            }
            const reader = new FileReader();
            reader.onload = () => onValue(typeof reader.result === 'string' ? reader.result : null);
            reader.readAsDataURL(file);
          }}
        />
      </div>
      <small class="hint">A PNG of at most 256 KiB and 1024×1024 pixels.</small>
      {problem && (
        <p class="error" role="alert">
          {problem}
        </p>
      )}
    </div>
  );
}

/** An icon from the service, or the first letter of the name on a coloured square. */
export function Avatar({ src, name, size = 32 }: { src: string | null | undefined; name: string; size?: number }) {
  if (src) return <img class="avatar" src={src} alt="" width={size} height={size} />;
  return (
    <span class="avatar letter" aria-hidden="true">
      {Array.from(name)[0]?.toUpperCase()}
    </span>
  );
}
