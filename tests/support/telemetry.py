"""OpenTelemetry: the SDK's in-memory exporters."""


class Otel:
    """An SDK tracer provider and meter provider recording in memory, and their readers."""

    def __init__(self):
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import InMemoryMetricReader
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

        self.exporter = InMemorySpanExporter()
        self.provider = TracerProvider()
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.reader = InMemoryMetricReader()
        self.meters = MeterProvider(metric_readers=[self.reader])
        # The host's own instrumentation (its web requests' server spans).
        self.host = self.provider.get_tracer("host")

    def spans(self, prefix: str = "") -> list:
        return [s for s in self.exporter.get_finished_spans() if s.name.startswith(prefix)]

    def one(self, name: str):
        [span] = self.spans(name)
        return span

    def points(self, name: str) -> list:
        data = self.reader.get_metrics_data()
        return [
            point
            for resource in (data.resource_metrics if data else [])
            for scope in resource.scope_metrics
            for found in scope.metrics
            if found.name == name
            for point in found.data.data_points
        ]

    def request(self, name: str):
        from opentelemetry.trace import SpanKind

        return self.host.start_as_current_span(name, kind=SpanKind.SERVER)
