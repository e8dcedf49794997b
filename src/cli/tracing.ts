import type { Tracer } from '@opentelemetry/api';

export interface DaemonTracing {
  tracer: Tracer;
  /** Sends what is still batched, then stops. */
  shutdown(): Promise<void>;
}

/**
 * The daemon's traces (docs/deployment.md: Traces): off by default, on when the standard
 * variables ask for OTLP (`OTEL_TRACES_EXPORTER=otlp`, or an `OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT`),
 * never with `OTEL_SDK_DISABLED=true` or `OTEL_TRACES_EXPORTER=none`. The exporter and the batch
 * processor read their own `OTEL_*` settings (endpoint, headers, timeouts, delays). The SDK is
 * loaded only then: it is a third of a daemon's start-up CPU.
 */
export async function daemonTracing(env: NodeJS.ProcessEnv, version: string): Promise<DaemonTracing | undefined> {
  if (env.OTEL_SDK_DISABLED?.toLowerCase() === 'true' || env.OTEL_TRACES_EXPORTER === 'none') return undefined;
  const endpoint = env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT || env.OTEL_EXPORTER_OTLP_ENDPOINT;
  if (!endpoint && env.OTEL_TRACES_EXPORTER !== 'otlp') return undefined;
  const [{ OTLPTraceExporter }, { resourceFromAttributes }, { BasicTracerProvider, BatchSpanProcessor }] = await Promise.all([
    import('@opentelemetry/exporter-trace-otlp-http'),
    import('@opentelemetry/resources'),
    import('@opentelemetry/sdk-trace-base'),
  ]);
  const provider = new BasicTracerProvider({
    resource: resourceFromAttributes({ 'service.name': env.OTEL_SERVICE_NAME || 'headless-run-webhook', 'service.version': version }),
    spanProcessors: [new BatchSpanProcessor(new OTLPTraceExporter())],
  });
  return { tracer: provider.getTracer('headless-run-webhook', version), shutdown: () => provider.shutdown() };
}
