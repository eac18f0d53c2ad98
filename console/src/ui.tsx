/** Small pieces every page uses: labelled fields, refusals, loading and empty states. */
import type { ComponentChildren, InputHTMLAttributes } from 'preact';
import { useEffect, useId, useRef, useState } from 'preact/hooks';
import { errorMessage } from './api.ts';

type InputProps = Omit<InputHTMLAttributes<HTMLInputElement>, 'label' | 'onInput' | 'value'> & {
  label: string;
  value: string;
  onValue: (value: string) => void;
  hint?: string;
};

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
    document.title = `${title} · Signalboard`;
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

/** An icon from the service, or the first letter on a coloured square. */
export function Avatar({ src, name, size = 32 }: { src: string | null | undefined; name: string; size?: number }) {
  if (src) return <img class="avatar" src={src} alt="" width={size} height={size} />;
  return (
    <span class="avatar letter" aria-hidden="true">
      {name.slice(0, 1).toUpperCase()}
    </span>
  );
}
