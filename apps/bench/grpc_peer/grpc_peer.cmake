# The gRPC peer of actorflow-bench (bench/grpc_peer.hpp): a static library
# of bench/grpc_peer.cpp and the code protoc generates from
# tensor_service.proto, on Debian's grpc++ and protobuf (libgrpc++-dev,
# libprotobuf-dev, protobuf-compiler, protobuf-compiler-grpc).
#
# Included from apps/CMakeLists.txt when ACTORFLOW_BENCH_PEERS is ON (so
# CMAKE_CURRENT_SOURCE_DIR is apps/), which links it into the bench. Only grpc_peer.cpp sees grpc's and
# protobuf's headers: the bench's own translation unit includes
# bench/grpc_peer.hpp, which includes neither.

find_package(PkgConfig REQUIRED)
pkg_check_modules(GRPCPP REQUIRED IMPORTED_TARGET grpc++ protobuf)
find_program(GRPC_CPP_PLUGIN grpc_cpp_plugin REQUIRED)
find_program(PROTOC protoc REQUIRED)

set(ACTORFLOW_GRPC_PEER_PROTO
    "${CMAKE_CURRENT_SOURCE_DIR}/bench/grpc_peer/tensor_service.proto")
set(ACTORFLOW_GRPC_PEER_GEN_DIR "${CMAKE_CURRENT_BINARY_DIR}/grpc_peer")
set(ACTORFLOW_GRPC_PEER_GEN
    "${ACTORFLOW_GRPC_PEER_GEN_DIR}/tensor_service.pb.cc"
    "${ACTORFLOW_GRPC_PEER_GEN_DIR}/tensor_service.pb.h"
    "${ACTORFLOW_GRPC_PEER_GEN_DIR}/tensor_service.grpc.pb.cc"
    "${ACTORFLOW_GRPC_PEER_GEN_DIR}/tensor_service.grpc.pb.h")
add_custom_command(
  OUTPUT ${ACTORFLOW_GRPC_PEER_GEN}
  COMMAND "${CMAKE_COMMAND}" -E make_directory "${ACTORFLOW_GRPC_PEER_GEN_DIR}"
  COMMAND "${PROTOC}"
          "-I${CMAKE_CURRENT_SOURCE_DIR}/bench/grpc_peer"
          "--cpp_out=${ACTORFLOW_GRPC_PEER_GEN_DIR}"
          "--grpc_out=${ACTORFLOW_GRPC_PEER_GEN_DIR}"
          "--plugin=protoc-gen-grpc=${GRPC_CPP_PLUGIN}"
          "${ACTORFLOW_GRPC_PEER_PROTO}"
  DEPENDS "${ACTORFLOW_GRPC_PEER_PROTO}" "${PROTOC}" "${GRPC_CPP_PLUGIN}"
  COMMENT "Generating the gRPC peer's code from tensor_service.proto"
  VERBATIM)

add_library(actorflow_bench_grpc_peer STATIC
  "${CMAKE_CURRENT_SOURCE_DIR}/bench/grpc_peer.cpp"
  ${ACTORFLOW_GRPC_PEER_GEN})
# grpc_peer.cpp includes "tensor_service.grpc.pb.h" from here.
target_include_directories(actorflow_bench_grpc_peer PRIVATE
  "${ACTORFLOW_GRPC_PEER_GEN_DIR}")
# PUBLIC: the bench's link line needs grpc++ and protobuf after this
# library.
target_link_libraries(actorflow_bench_grpc_peer
  PUBLIC PkgConfig::GRPCPP
  PRIVATE actorflow_options)
# The generated code is protoc's, not ours: no warnings for it.
set_source_files_properties(
  "${ACTORFLOW_GRPC_PEER_GEN_DIR}/tensor_service.pb.cc"
  "${ACTORFLOW_GRPC_PEER_GEN_DIR}/tensor_service.grpc.pb.cc"
  PROPERTIES COMPILE_OPTIONS "-w")
