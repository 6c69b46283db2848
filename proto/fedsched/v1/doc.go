// Package fedschedv1 is the generated Go code of the fedsched v1 API
// (site.proto in this directory): the SiteService that users talk to, its
// messages and enums.
//
// Do not edit the *.pb.go files; change site.proto and run `make proto` at
// the repository root (the Makefile pins protoc and the plugins, and
// `make proto-check` verifies that the committed code is current).
//
// Errors of the service are gRPC statuses with a google.rpc.ErrorInfo in
// the domain "fedsched.v1"; package node maps them to sentinel errors.
package fedschedv1
