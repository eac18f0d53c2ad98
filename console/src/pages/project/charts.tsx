/**
 * /projects/{namespace}/charts: events over time from `events.counts` (per feed, in the reader's
 * time zone), all feeds together and each on its own, drawn by uPlot. This page's chunk is the
 * only one that carries uPlot.
 */
import { useQuery } from '@tanstack/react-query';
import type { ComponentChildren } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';
import type { Schemas } from '../../api.ts';
import { countsQuery, zone } from '../../queries/counts-queries.ts';
import { Empty, ErrorNote, Loading, PageTitle, UserText } from '../../ui.tsx';
import type { ProjectPageProps } from './page-props.ts';

type Interval = Schemas['CountInterval'];
type Series = Schemas['CountSeries'];

const INTERVALS: { value: Interval; label: string; per: string; span: string }[] = [
  { value: 'minute', label: 'Minutes (last 24 hours)', per: 'minute', span: 'over the last 24 hours' },
  { value: 'hour', label: 'Hours (last 24 hours)', per: 'hour', span: 'over the last 24 hours' },
  { value: 'day', label: 'Days (last 30 days)', per: 'day', span: 'over the last 30 days' },
];

export default function Charts({ project }: ProjectPageProps) {
  const [interval, setInterval] = useState<Interval>('hour');
  const counts = useQuery({ ...countsQuery(project.namespace, interval), refetchInterval: 30_000 });
  const meta = INTERVALS.find((i) => i.value === interval)!;
  const series = counts.data?.series ?? [];
  const total = sumSeries(series);
  const perFeed = series.filter((s) => s.feed !== null);
  return (
    <section>
      <PageTitle title={`${project.name}: charts`}>Charts</PageTitle>
      <div class="field inline-field">
        <label for="chart-interval">Buckets</label>
        <select id="chart-interval" value={interval} onChange={(e) => setInterval(e.currentTarget.value as Interval)}>
          {INTERVALS.map((i) => (
            <option key={i.value} value={i.value}>
              {i.label}
            </option>
          ))}
        </select>
      </div>
      <p class="muted">Times in {counts.data?.tz ?? zone}.</p>
      <ErrorNote error={counts.error} />
      {counts.data && perFeed.length === 0 && series.length > 0 ? (
        <p class="muted">Too many feeds to chart each one by the {meta.per}: choose longer buckets to see them one by one.</p>
      ) : null}
      {counts.isLoading ? (
        <Loading what="Loading counts" />
      ) : !total ? (
        <Empty>No counts.</Empty>
      ) : (
        <div class="charts">
          <Chart name={`Events per ${meta.per}, all feeds, ${meta.span}`} title="All feeds" series={total} />
          {perFeed.map((s) => (
            <Chart
              key={s.feed}
              name={`Events per ${meta.per} in feed ${s.feed ?? ''}, ${meta.span}`}
              title={
                <>
                  #<UserText text={s.feed ?? ''} />
                </>
              }
              series={s}
            />
          ))}
        </div>
      )}
    </section>
  );
}

/** The feeds' series added up, bucket by bucket (they share their buckets). */
function sumSeries(series: Series[]): Series | null {
  const first = series[0];
  if (!first) return null;
  return {
    feed: null,
    buckets: first.buckets.map((bucket, i) => ({
      start: bucket.start,
      count: series.reduce((sum, s) => sum + (s.buckets[i]?.count ?? 0), 0),
    })),
  };
}

function Chart({ name, title, series }: { name: string; title: ComponentChildren; series: Series }) {
  const target = useRef<HTMLDivElement>(null);
  const total = series.buckets.reduce((sum, b) => sum + b.count, 0);
  useEffect(() => {
    const element = target.current;
    if (!element) return;
    const css = getComputedStyle(document.documentElement);
    const accent = css.getPropertyValue('--accent').trim() || '#4f46e5';
    const ink = css.getPropertyValue('--muted').trim() || '#666';
    const grid = css.getPropertyValue('--line').trim() || '#ddd';
    const data: uPlot.AlignedData = [series.buckets.map((b) => Date.parse(b.start) / 1000), series.buckets.map((b) => b.count)];
    const axis = { stroke: ink, grid: { stroke: grid, width: 1 }, ticks: { stroke: grid, width: 1 } };
    const plot = new uPlot(
      {
        width: Math.max(200, element.clientWidth),
        height: 200,
        legend: { show: false },
        cursor: { drag: { x: false, y: false } },
        scales: { x: { time: true }, y: { range: (_u, _min, max) => [0, Math.max(1, max)] } },
        axes: [axis, { ...axis, size: 48 }],
        series: [{}, { label: 'Events', stroke: accent, width: 2, fill: `${accent}33`, points: { show: false } }],
      },
      data,
      element,
    );
    const observer = new ResizeObserver(() => plot.setSize({ width: Math.max(200, element.clientWidth), height: 200 }));
    observer.observe(element);
    return () => {
      observer.disconnect();
      plot.destroy();
    };
  }, [series]);
  return (
    <figure class="chart panel">
      <figcaption>
        <strong>{title}</strong> <span class="muted">{total.toLocaleString()} events</span>
      </figcaption>
      <div ref={target} class="chart-canvas" role="img" aria-label={name} />
    </figure>
  );
}
