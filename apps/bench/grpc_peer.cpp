// The gRPC peer of actorflow-bench (grpc_peer.hpp): the server and client
// of grpc_peer/tensor_service.proto on Debian's grpc++.
//
// It aims at the best a straightforward TF-style user of grpc++ gets, so
// that a ratio against it is not a ratio against a careless peer:
//
// - Server: TensorFlow's grpc_tensor_coding.cc encodes a RecvTensorResponse
//   straight into a grpc::ByteBuffer, the small fields serialized and the
//   tensor's bytes added as a slice that references the tensor's buffer,
//   so a reply costs no serialization copy. Done here too: the `tensor`
//   field of a response is serialized once per size into a
//   reference-counted grpc::Slice (TF has the tensor in memory already),
//   and each reply is a ByteBuffer of a reference to that slice plus a
//   small slice with the call's send_start_micros. The fetch methods are
//   grpc's raw callback methods (ByteBuffer in, ByteBuffer out) for that;
//   the request is parsed with grpc::SerializationTraits as grpc would.
// - Client: TF parses a reply with its own TensorResponse, which copies
//   tensor_content from the ByteBuffer's slices into the tensor's buffer:
//   one copy, into a tensor it allocates per fetch. The generated parse
//   here also copies it once, but into a response object reused across
//   calls (`tensor` is `optional` in the .proto for that, see there), so
//   after the first fetch of a size there is no allocation and no page
//   fault: more than TF gets (with a fresh buffer per call, a 64 MiB
//   fetch took twice as long here). One channel, reused; the stream stays
//   open across calls.
// - TF drives its worker service through the async completion-queue API
//   with polling threads of its own (a thread hand-off per call on both
//   sides; its client waits for a reply that its polling thread parsed);
//   the client here waits on its calls in the calling thread and the
//   server uses grpc's callback API, so this peer should have no more
//   per-call overhead than TF itself, and likely less. (A sync-API server
//   measured the same for small calls and slower at 64 MiB, where it
//   serializes the reply per call.)

#include "grpc_peer.hpp"

#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

#include <grpcpp/grpcpp.h>

#include "tensor_service.grpc.pb.h"

namespace actorflow::bench {

namespace {

namespace peer = actorflow::bench::peer;
using peer_service = peer::TensorService;

/// TF's DataType DT_FLOAT.
constexpr int32_t dt_float = 1;

constexpr std::string_view fetch_prefix = "fetch:";
constexpr size_t ping_request_bytes = 48;
constexpr size_t ping_reply_bytes = 64;

/// The bytes a rendezvous key asks for, or nothing for a malformed key or
/// a size that is not a float32 tensor's within grpc_peer_max_bytes.
std::optional<uint64_t> fetch_bytes(std::string_view key) {
  if (!key.starts_with(fetch_prefix))
    return std::nullopt;
  key.remove_prefix(fetch_prefix.size());
  uint64_t bytes = 0;
  auto [end, err] = std::from_chars(key.data(), key.data() + key.size(), bytes);
  if (err != std::errc{} || end != key.data() + key.size() || bytes % 4 != 0
      || bytes > grpc_peer_max_bytes)
    return std::nullopt;
  return bytes;
}

std::string fetch_key(uint64_t bytes) {
  return std::string{fetch_prefix} + std::to_string(bytes);
}

const char* status_code_name(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::OK: return "OK";
    case grpc::StatusCode::CANCELLED: return "CANCELLED";
    case grpc::StatusCode::UNKNOWN: return "UNKNOWN";
    case grpc::StatusCode::INVALID_ARGUMENT: return "INVALID_ARGUMENT";
    case grpc::StatusCode::DEADLINE_EXCEEDED: return "DEADLINE_EXCEEDED";
    case grpc::StatusCode::NOT_FOUND: return "NOT_FOUND";
    case grpc::StatusCode::ALREADY_EXISTS: return "ALREADY_EXISTS";
    case grpc::StatusCode::PERMISSION_DENIED: return "PERMISSION_DENIED";
    case grpc::StatusCode::UNAUTHENTICATED: return "UNAUTHENTICATED";
    case grpc::StatusCode::RESOURCE_EXHAUSTED: return "RESOURCE_EXHAUSTED";
    case grpc::StatusCode::FAILED_PRECONDITION: return "FAILED_PRECONDITION";
    case grpc::StatusCode::ABORTED: return "ABORTED";
    case grpc::StatusCode::OUT_OF_RANGE: return "OUT_OF_RANGE";
    case grpc::StatusCode::UNIMPLEMENTED: return "UNIMPLEMENTED";
    case grpc::StatusCode::INTERNAL: return "INTERNAL";
    case grpc::StatusCode::UNAVAILABLE: return "UNAVAILABLE";
    case grpc::StatusCode::DATA_LOSS: return "DATA_LOSS";
    default: return "status";
  }
}

std::runtime_error call_error(const char* call, const grpc::Status& status) {
  std::string what = "grpc peer: ";
  what += call;
  what += " failed: ";
  what += status_code_name(status.error_code());
  if (!status.error_message().empty())
    what += ": " + status.error_message();
  return std::runtime_error(what);
}

auto call_deadline() {
  return std::chrono::system_clock::now()
         + std::chrono::seconds(grpc_peer_call_timeout_s);
}

// ---------------------------------------------------------------------------
// Server

/// The serialized `tensor` field of a RecvTensorResponse (a valid response
/// on its own) per size, built on first use and kept for the server's
/// life. A grpc::Slice copy is a reference, not the bytes.
class tensor_cache {
public:
  grpc::Slice get(uint64_t bytes) {
    std::lock_guard lock{mutex_};
    auto i = slices_.find(bytes);
    if (i == slices_.end())
      i = slices_.emplace(bytes, build(bytes)).first;
    return i->second;
  }

private:
  static grpc::Slice build(uint64_t bytes) {
    peer::RecvTensorResponse response;
    auto* tensor = response.mutable_tensor();
    tensor->set_dtype(dt_float);
    auto n = static_cast<int64_t>(bytes / 4);
    tensor->mutable_tensor_shape()->add_dim()->set_size(n);
    auto* content = tensor->mutable_tensor_content();
    content->resize(bytes);
    for (int64_t k = 0; k < n; ++k) {
      auto value = static_cast<float>(k % 1024) * 0.5f;
      std::memcpy(content->data() + k * 4, &value, 4);
    }
    // The slice takes the string over (no copy) and frees it with its
    // last reference.
    auto* serialized = new std::string;
    response.SerializeToString(serialized);
    return grpc::Slice(
      serialized->data(), serialized->size(),
      [](void* p) { delete static_cast<std::string*>(p); }, serialized);
  }

  std::mutex mutex_;
  std::map<uint64_t, grpc::Slice> slices_;
};

using service_base = peer_service::WithRawCallbackMethod_RecvTensor<
  peer_service::WithRawCallbackMethod_RecvTensorStream<
    peer_service::WithCallbackMethod_Ping<peer_service::Service>>>;

class tensor_service final : public service_base {
public:
  tensor_service() : pong_(ping_reply_bytes, 'q') {
  }

  /// Parses a raw request and sets `reply` to the tensor it asks for.
  grpc::Status answer(grpc::ByteBuffer& raw, peer::RecvTensorRequest& request,
                      grpc::ByteBuffer& reply) {
    // Deserialize empties `raw`, which the caller no longer needs.
    auto status = grpc::SerializationTraits<peer::RecvTensorRequest>::
      Deserialize(&raw, &request);
    if (!status.ok())
      return status;
    auto bytes = fetch_bytes(request.rendezvous_key());
    if (!bytes)
      return {grpc::StatusCode::INVALID_ARGUMENT,
              "rendezvous_key is not fetch:<bytes> with <bytes> a multiple "
              "of 4 up to 256 MiB: "
                + request.rendezvous_key()};
    // TF stamps each reply when it starts sending it.
    peer::RecvTensorResponse tail;
    tail.set_send_start_micros(
      std::chrono::duration_cast<std::chrono::microseconds>(
        std::chrono::system_clock::now().time_since_epoch())
        .count());
    char encoded[16]; // a tag byte and a varint of 10 bytes at most
    auto size = tail.ByteSizeLong();
    tail.SerializeToArray(encoded, static_cast<int>(size));
    // Concatenated serialized messages parse as their merge.
    grpc::Slice parts[2] = {cache_.get(*bytes), grpc::Slice(encoded, size)};
    reply = grpc::ByteBuffer(parts, 2);
    return grpc::Status::OK;
  }

  grpc::ServerUnaryReactor* RecvTensor(grpc::CallbackServerContext* context,
                                       const grpc::ByteBuffer* raw,
                                       grpc::ByteBuffer* reply) override {
    auto request_bytes = *raw; // a reference, for a non-const Deserialize
    peer::RecvTensorRequest request;
    auto* reactor = context->DefaultReactor();
    reactor->Finish(answer(request_bytes, request, *reply));
    return reactor;
  }

  grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>*
  RecvTensorStream(grpc::CallbackServerContext*) override;

  grpc::ServerUnaryReactor* Ping(grpc::CallbackServerContext* context,
                                 const peer::PingRequest*,
                                 peer::PingResponse* reply) override {
    reply->set_payload(pong_);
    auto* reactor = context->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }

private:
  tensor_cache cache_;
  std::string pong_;
};

/// One RecvTensorStream call: read a request, write its reply, repeat
/// until the client's WritesDone. grpc deletes nothing: OnDone does.
class tensor_stream final
  : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
public:
  explicit tensor_stream(tensor_service& service) : service_(service) {
    StartRead(&in_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) { // the client's WritesDone, or a broken call
      Finish(grpc::Status::OK);
      return;
    }
    auto status = service_.answer(in_, request_, out_);
    if (!status.ok()) {
      Finish(status);
      return;
    }
    StartWrite(&out_);
  }

  void OnWriteDone(bool ok) override {
    if (!ok) {
      Finish({grpc::StatusCode::UNAVAILABLE, "writing a reply failed"});
      return;
    }
    StartRead(&in_);
  }

  void OnDone() override {
    delete this;
  }

private:
  tensor_service& service_;
  grpc::ByteBuffer in_;
  grpc::ByteBuffer out_;
  peer::RecvTensorRequest request_; // reused across the stream's requests
};

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>*
tensor_service::RecvTensorStream(grpc::CallbackServerContext*) {
  return new tensor_stream(*this);
}

// ---------------------------------------------------------------------------
// Client

/// The client's RecvTensorStream call on the async API with a completion
/// queue of its own, waited on by the calling thread: unlike the sync
/// stream API, each wait takes a deadline, so one fetch has one while the
/// stream itself has none.
class fetch_stream {
public:
  explicit fetch_stream(peer_service::Stub& stub)
    : rw_(stub.PrepareAsyncRecvTensorStream(&context_, &queue_)) {
  }

  /// Starts the call; throws (and leaves the stream unusable) on failure.
  /// Apart from the constructor so that a failure still runs the
  /// destructor, which drains the queue.
  void open() {
    rw_->StartCall(tag(op_start));
    await_or_throw(op_start, "RecvTensorStream (open)");
  }

  fetch_stream(const fetch_stream&) = delete;
  fetch_stream& operator=(const fetch_stream&) = delete;

  ~fetch_stream() {
    if (!finished_) {
      bool timed_out = false;
      if (healthy_) {
        rw_->WritesDone(tag(op_writes_done));
        await(op_writes_done, timed_out);
      }
      rw_->Finish(&status_, tag(op_finish));
      await(op_finish, timed_out);
    }
    rw_.reset();
    queue_.Shutdown();
    void* t = nullptr;
    bool ok = false;
    while (queue_.Next(&t, &ok)) {
    }
  }

  /// Sends `request` and reads its reply into `response`; throws (and
  /// leaves the stream unusable) on failure or after the deadline.
  void fetch(const peer::RecvTensorRequest& request,
             peer::RecvTensorResponse& response) {
    // One write and one read outstanding at a time is what a grpc stream
    // allows; the write is serialized at once, the read parses in place.
    rw_->Write(request, tag(op_write));
    rw_->Read(&response, tag(op_read));
    await_or_throw(op_write | op_read, "RecvTensorStream");
  }

private:
  enum op : unsigned {
    op_start = 1,
    op_write = 2,
    op_read = 4,
    op_writes_done = 8,
    op_finish = 16,
  };

  static void* tag(op o) {
    return reinterpret_cast<void*>(static_cast<uintptr_t>(o));
  }

  /// Waits until every op in `ops` completed; returns those that failed.
  /// At the deadline it cancels the call (which completes every pending op
  /// at once), waits for them, and sets `timed_out`.
  unsigned await(unsigned ops, bool& timed_out) {
    auto deadline = call_deadline();
    unsigned failed = 0;
    while (ops != 0) {
      void* t = nullptr;
      bool ok = false;
      using queue = grpc::CompletionQueue;
      // Once cancelled, every pending op completes without delay.
      auto got = timed_out ? (queue_.Next(&t, &ok) ? queue::GOT_EVENT
                                                   : queue::SHUTDOWN)
                           : queue_.AsyncNext(&t, &ok, deadline);
      if (got == queue::TIMEOUT) {
        context_.TryCancel();
        timed_out = true;
        healthy_ = false;
        continue;
      }
      if (got == queue::SHUTDOWN)
        break; // not reached: only the destructor shuts the queue down
      auto bit = static_cast<unsigned>(reinterpret_cast<uintptr_t>(t));
      ops &= ~bit;
      if (!ok)
        failed |= bit;
    }
    return failed;
  }

  void await_or_throw(unsigned ops, const char* call) {
    bool timed_out = false;
    auto failed = await(ops, timed_out);
    if (timed_out)
      throw call_error(call, {grpc::StatusCode::DEADLINE_EXCEEDED,
                              "no reply within "
                                + std::to_string(grpc_peer_call_timeout_s)
                                + " s"});
    if (failed == 0)
      return;
    // The call is over: its status says why.
    healthy_ = false;
    rw_->Finish(&status_, tag(op_finish));
    await(op_finish, timed_out);
    finished_ = true; // completed, if need be cancelled
    if (status_.ok())
      throw call_error(call, {grpc::StatusCode::UNKNOWN,
                              "the server ended the stream"});
    throw call_error(call, status_);
  }

  grpc::CompletionQueue queue_;
  grpc::ClientContext context_;
  std::unique_ptr<grpc::ClientAsyncReaderWriter<peer::RecvTensorRequest,
                                                peer::RecvTensorResponse>>
    rw_;
  grpc::Status status_;
  bool healthy_ = true;   // no op failed: WritesDone is worth sending
  bool finished_ = false; // Finish was called (and completed)
};

void check_fetch_size(uint64_t bytes) {
  if (bytes % 4 != 0 || bytes > grpc_peer_max_bytes)
    throw std::invalid_argument(
      "grpc peer: a fetch of " + std::to_string(bytes)
      + " bytes (not a float32 tensor's size up to 256 MiB)");
}

void check_tensor(const peer::RecvTensorResponse& response, uint64_t bytes,
                  const char* call) {
  auto got = response.tensor().tensor_content().size();
  if (got != bytes)
    throw std::runtime_error(std::string{"grpc peer: "} + call + " of "
                             + std::to_string(bytes) + " bytes returned "
                             + std::to_string(got) + " bytes");
}

} // namespace

int serve_grpc_peer(pid_t parent, const std::string& ip) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (parent > 0 && ::getppid() != parent)
    return 1; // the parent died before prctl took effect
  // grpc's threads inherit the mask, so only sigtimedwait below takes them.
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);

  tensor_service service; // outlives the server
  int port = 0;
  grpc::ServerBuilder builder;
  builder.AddListeningPort(ip + ":0", grpc::InsecureServerCredentials(),
                           &port);
  builder.SetMaxReceiveMessageSize(-1);
  builder.SetMaxSendMessageSize(-1);
  builder.RegisterService(&service);
  auto server = builder.BuildAndStart();
  if (!server || port <= 0)
    return 1;
  // stdout is a pipe to the parent: one write, no stdio buffer to flush.
  auto line = std::string{grpc_peer_marker} + std::to_string(port) + "\n";
  if (::write(1, line.data(), line.size())
      != static_cast<ssize_t>(line.size())) {
    server->Shutdown();
    return 1;
  }
  for (;;) {
    timespec one_second{1, 0};
    auto sig = sigtimedwait(&stop, nullptr, &one_second);
    if (sig == SIGTERM || sig == SIGINT)
      break;
    if (parent > 0 && ::getppid() != parent)
      break;
  }
  // A client's stream still open a second later is cancelled.
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  server->Wait();
  return 0;
}

struct grpc_peer_client::impl {
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<peer_service::Stub> stub;
  // Reused by every fetch (unary or streamed) and ping: the key changes
  // only with the size, the response's buffers keep their capacity.
  peer::RecvTensorRequest fetch_request;
  std::optional<uint64_t> fetch_request_bytes;
  peer::RecvTensorResponse fetch_response;
  peer::PingRequest ping_request;
  peer::PingResponse ping_response;
  std::unique_ptr<fetch_stream> stream;

  void prepare_fetch(uint64_t bytes) {
    check_fetch_size(bytes);
    if (fetch_request_bytes != bytes) {
      fetch_request.set_rendezvous_key(fetch_key(bytes));
      fetch_request_bytes = bytes;
    }
    // As TF's steps, each fetch belongs to a new step.
    fetch_request.set_step_id(fetch_request.step_id() + 1);
  }
};

grpc_peer_client::grpc_peer_client(uint16_t port, const std::string& ip)
  : impl_(new impl) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(-1);
  args.SetMaxSendMessageSize(-1);
  auto target = ip + ":" + std::to_string(port);
  impl_->channel = grpc::CreateCustomChannel(
    target, grpc::InsecureChannelCredentials(), args);
  if (!impl_->channel->WaitForConnected(
        std::chrono::system_clock::now()
        + std::chrono::seconds(grpc_peer_connect_timeout_s)))
    throw std::runtime_error("grpc peer: no connection to " + target
                             + " within "
                             + std::to_string(grpc_peer_connect_timeout_s)
                             + " s");
  impl_->stub = peer_service::NewStub(impl_->channel);
  impl_->ping_request.set_payload(std::string(ping_request_bytes, 'p'));
}

grpc_peer_client::~grpc_peer_client() = default;

void grpc_peer_client::recv_tensor(uint64_t bytes) {
  auto& s = *impl_;
  s.prepare_fetch(bytes);
  grpc::ClientContext context; // grpc allows one call per context
  context.set_deadline(call_deadline());
  auto status =
    s.stub->RecvTensor(&context, s.fetch_request, &s.fetch_response);
  if (!status.ok())
    throw call_error("RecvTensor", status);
  check_tensor(s.fetch_response, bytes, "RecvTensor");
}

void grpc_peer_client::recv_tensor_streaming(uint64_t bytes) {
  auto& s = *impl_;
  s.prepare_fetch(bytes);
  try {
    if (!s.stream) {
      s.stream = std::make_unique<fetch_stream>(*s.stub);
      s.stream->open();
    }
    s.stream->fetch(s.fetch_request, s.fetch_response);
  } catch (...) {
    s.stream.reset(); // the next call opens a new one
    throw;
  }
  check_tensor(s.fetch_response, bytes, "RecvTensorStream");
}

void grpc_peer_client::ping() {
  auto& s = *impl_;
  grpc::ClientContext context;
  context.set_deadline(call_deadline());
  auto status = s.stub->Ping(&context, s.ping_request, &s.ping_response);
  if (!status.ok())
    throw call_error("Ping", status);
  if (s.ping_response.payload().size() != ping_reply_bytes)
    throw std::runtime_error("grpc peer: Ping returned "
                             + std::to_string(s.ping_response.payload().size())
                             + " bytes instead of 64");
}

} // namespace actorflow::bench
