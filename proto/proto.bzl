"""Generates C++ protobuf + gRPC code with the system protoc (offline)."""

def proto_cc_library(name, src, deps = [], imports = [], grpc = None, **kwargs):
    """`name`: the messages of `src` (protobuf only, no gRPC); `grpc`, when
    set: a second library of that name with the services' stubs, the only
    one that links grpc++. `imports`: the .proto files `src` imports (their
    libraries go in `deps`)."""
    base = src[:-len(".proto")]
    outs = [base + ".pb.h", base + ".pb.cc"]
    cmd = "protoc -I. --cpp_out=$(GENDIR) "
    if grpc:
        outs += [base + ".grpc.pb.h", base + ".grpc.pb.cc"]
        cmd += ("--grpc_out=$(GENDIR) " +
                "--plugin=protoc-gen-grpc=$$(command -v grpc_cpp_plugin) ")
    native.genrule(
        name = name + "_gen",
        srcs = [src] + imports,
        outs = outs,
        cmd = cmd + "$(location " + src + ")",
    )
    native.cc_library(
        name = name,
        srcs = [base + ".pb.cc"],
        hdrs = [base + ".pb.h"],
        deps = deps + ["//third_party:protobuf"],
        **kwargs
    )
    if grpc:
        native.cc_library(
            name = grpc,
            srcs = [base + ".grpc.pb.cc"],
            hdrs = [base + ".grpc.pb.h"],
            deps = [":" + name, "//third_party:grpc++", "//third_party:protobuf"],
            **kwargs
        )
