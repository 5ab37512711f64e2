"""Generates C++ protobuf + gRPC code with the system protoc (offline)."""

def grpc_cc_library(name, src, deps = [], imports = [], **kwargs):
    """`imports`: the .proto files `src` imports (their libraries go in
    `deps`)."""
    base = src[:-len(".proto")]
    outs = [
        base + ".pb.h",
        base + ".pb.cc",
        base + ".grpc.pb.h",
        base + ".grpc.pb.cc",
    ]
    native.genrule(
        name = name + "_gen",
        srcs = [src] + imports,
        outs = outs,
        cmd = ("protoc -I. --cpp_out=$(GENDIR) --grpc_out=$(GENDIR) " +
               "--plugin=protoc-gen-grpc=$$(command -v grpc_cpp_plugin) " +
               "$(location " + src + ")"),
    )
    native.cc_library(
        name = name,
        srcs = [base + ".pb.cc", base + ".grpc.pb.cc"],
        hdrs = [base + ".pb.h", base + ".grpc.pb.h"],
        deps = deps + ["//third_party:grpc++", "//third_party:protobuf"],
        **kwargs
    )
