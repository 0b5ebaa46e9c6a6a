// Package modgraph holds the test that keeps the library's module graph
// light: a program that imports only the root package (or only transport,
// header or security) must not find the console's browser driver, the
// command's cobra, SQL drivers, Prometheus or codec libraries among its
// modules. Those parts are modules of their own; see
// docs/contributing.md#modules. The package has no code of its own.
package modgraph
