module dagger/dorisarm

go 1.26

// Dagger v0.21.0's Go code generator runs `go get -u dagger.io/dagger@v0.21.0`
// and `go mod tidy` here on every module load, so whatever is newest on the
// module proxy is picked unless replaced. go.opentelemetry.io/otel v1.47.0's
// internal/global imports otel/log, while the SDK pins otel/log (and the log
// SDK and exporters) to v0.16.0, whose packages import otel/internal/global:
// an import cycle, and the module never builds. These lines pin the otel core
// and its SDK to the last release before that (v1.46.0; the otel repository
// releases its v1 modules together, so they move as one) and repeat the
// SDK's own v0.16.0 pins so the first code generation pass (before the
// generator copies them in) resolves the same way as the second.
//
// github.com/dagger/otel-go is imported by the generated code but required by
// nothing, so tidy takes its newest pseudo-version. Since 2026-11-24 that one
// (v1.47.1-0.20261124213443-e79f0e10530f) is written against otel/log v1.47,
// where log.Value is attribute.Value, and does not compile against the SDK's
// otel/log v0.16.0. It is pinned to the last commit that does.
//
// Checked by `make test-ci-module` (cmd/dorisarm/cimodule_test.go), which
// resolves this file as the generator does, against the Go module proxy.
// Requirements are not listed: `go get -u` would raise them anyway.
replace (
	github.com/dagger/otel-go => github.com/dagger/otel-go v1.43.1-0.20261102220336-aa07da582c21
	go.opentelemetry.io/otel => go.opentelemetry.io/otel v1.46.0
	go.opentelemetry.io/otel/exporters/otlp/otlplog/otlploggrpc => go.opentelemetry.io/otel/exporters/otlp/otlplog/otlploggrpc v0.16.0
	go.opentelemetry.io/otel/exporters/otlp/otlplog/otlploghttp => go.opentelemetry.io/otel/exporters/otlp/otlplog/otlploghttp v0.16.0
	go.opentelemetry.io/otel/log => go.opentelemetry.io/otel/log v0.16.0
	go.opentelemetry.io/otel/metric => go.opentelemetry.io/otel/metric v1.46.0
	go.opentelemetry.io/otel/sdk => go.opentelemetry.io/otel/sdk v1.46.0
	go.opentelemetry.io/otel/sdk/log => go.opentelemetry.io/otel/sdk/log v0.16.0
	go.opentelemetry.io/otel/sdk/metric => go.opentelemetry.io/otel/sdk/metric v1.46.0
	go.opentelemetry.io/otel/trace => go.opentelemetry.io/otel/trace v1.46.0
)
