// TensorFlow's ReaderBase and its file readers (tf_semantics §11.1), after
// core/framework/reader_base.cc, core/kernels/text_line_reader_op.cc,
// fixed_length_record_reader_op.cc and whole_file_read_ops.cc, with the
// buffering of core/lib/io/inputbuffer.cc and zlib_inputstream.cc.

#include "actorflow/kernels/reader_core.hpp"

#include "actorflow/kernels/file_policy.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <system_error>
#include <utility>

namespace actorflow {

namespace {

// TF's kBufferSize of the readers and of the zlib input/output buffers.
constexpr size_t buffer_size = 256 << 10;

// tensorflow/core/platform/errors ErrnoToCode.
error_code errno_to_code(int err) {
  switch (err) {
    case EINVAL:
    case ENAMETOOLONG:
    case E2BIG:
    case EDESTADDRREQ:
    case EDOM:
    case EFAULT:
    case EILSEQ:
    case ENOPROTOOPT:
    case ENOTSOCK:
    case ENOTTY:
    case EPROTOTYPE:
    case ESPIPE:
      return error_code::invalid_argument;
    case ETIMEDOUT:
      return error_code::deadline_exceeded;
    case ENODEV:
    case ENOENT:
    case ENXIO:
    case ESRCH:
      return error_code::not_found;
    case EEXIST:
    case EADDRNOTAVAIL:
    case EALREADY:
      return error_code::already_exists;
    case EPERM:
    case EACCES:
    case EROFS:
      return error_code::permission_denied;
    case ENOTEMPTY:
    case EISDIR:
    case ENOTDIR:
    case EADDRINUSE:
    case EBADF:
    case EBUSY:
    case ECHILD:
    case EISCONN:
    case ENOTCONN:
    case EPIPE:
    case ETXTBSY:
      return error_code::failed_precondition;
    case ENOSPC:
    case EDQUOT:
    case EMFILE:
    case EMLINK:
    case ENFILE:
    case ENOBUFS:
    case ENOMEM:
      return error_code::resource_exhausted;
    case EFBIG:
    case EOVERFLOW:
    case ERANGE:
      return error_code::out_of_range;
    case ENOSYS:
    case ENOTSUP:
    case EAFNOSUPPORT:
    case EPROTONOSUPPORT:
    case EXDEV:
      return error_code::unimplemented;
    case EAGAIN:
    case ECONNREFUSED:
    case ECONNABORTED:
    case ECONNRESET:
    case EINTR:
    case EHOSTUNREACH:
    case ENETDOWN:
    case ENETRESET:
    case ENETUNREACH:
    case ENOLCK:
      return error_code::unavailable;
    case EDEADLK:
    case ESTALE:
      return error_code::aborted;
    case ECANCELED:
      return error_code::cancelled;
    default:
      return error_code::unknown;
  }
}

// TF's IOError: "<file>; No such file or directory". generic_category
// gives strerror's text without strerror's shared buffer.
status io_error(const std::string& context, int err) {
  return {errno_to_code(err),
          context + "; " + std::generic_category().message(err)};
}

status out_of_range(std::string msg) {
  return {error_code::out_of_range, std::move(msg)};
}

// A file read front to back (TF reads with pread at increasing offsets).
class posix_file {
public:
  posix_file() = default;
  posix_file(const posix_file&) = delete;
  posix_file& operator=(const posix_file&) = delete;
  ~posix_file() {
    if (fd_ >= 0)
      ::close(fd_);
  }

  /// Opens `path` for `who` (the reader, named in refusals) if the
  /// process's file policy lets it (file_policy.hpp): PermissionDenied
  /// for a path outside the file roots or a denied file, before anything
  /// is opened.
  status open(const std::string& who, const std::string& path) {
    path_ = path;
    std::string resolved;
    if (auto st = check_file_access(who, path, file_access::read, &resolved);
        !st.ok())
      return st;
    // The resolved path is the one checked (links followed).
    const auto& target = resolved.empty() ? path : resolved;
    int fd;
    do {
      fd = ::open(target.c_str(), O_RDONLY | O_CLOEXEC);
    } while (fd < 0 && errno == EINTR);
    if (fd < 0)
      return io_error(path, errno);
    // A link swapped in between the check and the open.
    if (auto st = check_opened_file(who, path, fd); !st.ok()) {
      ::close(fd);
      return st;
    }
    fd_ = fd;
    return {};
  }

  /// Up to `n` bytes; `got` is 0 only at the end of the file.
  status read(char* dst, size_t n, size_t& got) {
    got = 0;
    for (;;) {
      auto r = ::read(fd_, dst, n);
      if (r >= 0) {
        got = static_cast<size_t>(r);
        return {};
      }
      if (errno != EINTR)
        return io_error(path_, errno);
    }
  }

  /// The size if the file is a regular one, else 0 (a hint only).
  size_t size_hint() const {
    struct stat st {};
    if (::fstat(fd_, &st) == 0 && S_ISREG(st.st_mode))
      return static_cast<size_t>(st.st_size);
    return 0;
  }

private:
  int fd_ = -1;
  std::string path_;
};

// The bytes of a work unit: the file's own or its inflated content.
class byte_source {
public:
  virtual ~byte_source() = default;
  /// Up to `n` bytes; `got` is 0 only at the end.
  virtual status read(char* dst, size_t n, size_t& got) = 0;
};

class file_source final : public byte_source {
public:
  status open(const std::string& who, const std::string& path) {
    return file_.open(who, path);
  }
  status read(char* dst, size_t n, size_t& got) override {
    return file_.read(dst, n, got);
  }

private:
  posix_file file_;
};

// TF's ZlibInputStream: ZLIB (window bits MAX_WBITS) or GZIP (16 +
// MAX_WBITS). A gzip stream may hold several members; a truncated stream
// just ends, as TF's reader sees an OutOfRange there.
class zlib_source final : public byte_source {
public:
  explicit zlib_source(bool gzip) : gzip_(gzip), in_(buffer_size) {
    // nop
  }
  zlib_source(const zlib_source&) = delete;
  zlib_source& operator=(const zlib_source&) = delete;
  ~zlib_source() override {
    if (initialized_)
      ::inflateEnd(&zs_);
  }

  status open(const std::string& who, const std::string& path) {
    if (auto st = file_.open(who, path); !st.ok())
      return st;
    std::memset(&zs_, 0, sizeof(zs_));
    auto rc = ::inflateInit2(&zs_, gzip_ ? 16 + MAX_WBITS : MAX_WBITS);
    if (rc != Z_OK)
      return {error_code::resource_exhausted,
              "inflateInit2 failed with error " + std::to_string(rc)};
    initialized_ = true;
    return {};
  }

  status read(char* dst, size_t n, size_t& got) override {
    got = 0;
    if (done_ || n == 0)
      return {};
    auto cap = static_cast<uInt>(
      std::min<size_t>(n, std::numeric_limits<uInt>::max()));
    zs_.next_out = reinterpret_cast<Bytef*>(dst);
    zs_.avail_out = cap;
    while (zs_.avail_out == cap) {
      if (zs_.avail_in == 0) {
        size_t m = 0;
        if (auto st = file_.read(in_.data(), in_.size(), m); !st.ok())
          return st;
        if (m == 0) {
          done_ = true;
          break;
        }
        zs_.next_in = reinterpret_cast<Bytef*>(in_.data());
        zs_.avail_in = static_cast<uInt>(m);
      }
      auto rc = ::inflate(&zs_, Z_NO_FLUSH);
      if (rc == Z_STREAM_END) {
        // TF resets after a gzip member, so concatenated members read as
        // one stream; a zlib stream ends here.
        if (gzip_) {
          ::inflateReset(&zs_);
        } else {
          done_ = true;
          break;
        }
      } else if (rc == Z_BUF_ERROR && zs_.avail_in == 0) {
        continue; // needs more input
      } else if (rc != Z_OK) {
        auto msg = "inflate() failed with error " + std::to_string(rc);
        if (zs_.msg != nullptr)
          msg += std::string{": "} + zs_.msg;
        return {error_code::data_loss, std::move(msg)};
      }
    }
    got = cap - zs_.avail_out;
    return {};
  }

private:
  bool gzip_;
  bool initialized_ = false;
  bool done_ = false;
  posix_file file_;
  z_stream zs_{};
  std::vector<char> in_;
};

// A buffer over a byte source: TF's InputBuffer (lines) and
// BufferedInputStream (byte counts).
class input_buffer {
public:
  explicit input_buffer(std::unique_ptr<byte_source> src)
    : src_(std::move(src)), buf_(buffer_size) {
    // nop
  }

  /// InputBuffer::ReadLine: the text up to '\n' without it and without one
  /// '\r' before it. At the end of the data, a non-empty rest (after
  /// dropping a final '\r') is the last line; else `got` is false.
  status read_line(std::string& line, bool& got) {
    line.clear();
    got = false;
    for (;;) {
      if (pos_ == limit_) {
        if (auto st = fill(); !st.ok())
          return st;
        if (limit_ == 0)
          break;
      }
      auto* start = buf_.data() + pos_;
      auto avail = limit_ - pos_;
      auto* nl = static_cast<const char*>(std::memchr(start, '\n', avail));
      if (nl != nullptr) {
        auto len = static_cast<size_t>(nl - start);
        line.append(start, len);
        pos_ += len + 1;
        drop_cr(line);
        got = true;
        return {};
      }
      line.append(start, avail);
      pos_ = limit_;
    }
    drop_cr(line);
    got = !line.empty();
    return {};
  }

  /// Appends up to `n` bytes to `out` (drops them if `out` is null);
  /// `complete` is false when the data ended first (TF's OutOfRange of
  /// ReadNBytes).
  status read_n(size_t n, std::string* out, bool& complete) {
    complete = false;
    while (n > 0) {
      if (pos_ == limit_) {
        if (auto st = fill(); !st.ok())
          return st;
        if (limit_ == 0)
          return {};
      }
      auto take = std::min(n, limit_ - pos_);
      if (out != nullptr)
        out->append(buf_.data() + pos_, take);
      pos_ += take;
      n -= take;
    }
    complete = true;
    return {};
  }

private:
  static void drop_cr(std::string& line) {
    if (!line.empty() && line.back() == '\r')
      line.pop_back();
  }

  status fill() {
    pos_ = 0;
    limit_ = 0;
    size_t got = 0;
    auto st = src_->read(buf_.data(), buf_.size(), got);
    limit_ = got;
    return st;
  }

  std::unique_ptr<byte_source> src_;
  std::vector<char> buf_;
  size_t pos_ = 0;
  size_t limit_ = 0;
};

std::string record_key(const std::string& work, int64_t n) {
  return work + ":" + std::to_string(n);
}

class text_line_reader final : public reader_core {
public:
  text_line_reader(const std::string& node, int64_t skip_header_lines)
    : reader_core("TextLineReader '" + node + "'"),
      skip_header_lines_(skip_header_lines) {
    // nop
  }

protected:
  status on_work_started() override {
    line_number_ = 0;
    auto file = std::make_unique<file_source>();
    if (auto st = file->open(name(), current_work()); !st.ok())
      return st;
    input_ = std::make_unique<input_buffer>(std::move(file));
    std::string line;
    for (; line_number_ < skip_header_lines_; ++line_number_) {
      bool got = false;
      if (auto st = input_->read_line(line, got); !st.ok())
        return st;
      // A file shorter than its header just yields no records (TF ignores
      // the end of file here).
      if (!got)
        return {};
    }
    return {};
  }

  void on_work_finished() override {
    input_.reset();
  }

  status read_up_to_locked(int64_t n, std::vector<std::string>& keys,
                           std::vector<std::string>& values,
                           int64_t& produced, bool& at_end) override {
    std::string line;
    while (produced < n) {
      bool got = false;
      auto st = input_->read_line(line, got);
      // TF counts the attempt, so header lines keep their numbers.
      ++line_number_;
      if (!st.ok())
        return st;
      if (!got) {
        at_end = true;
        return {};
      }
      keys.push_back(record_key(current_work(), line_number_));
      values.push_back(std::move(line));
      ++produced;
    }
    return {};
  }

private:
  int64_t skip_header_lines_;
  int64_t line_number_ = 0;
  std::unique_ptr<input_buffer> input_;
};

class fixed_length_record_reader final : public reader_core {
public:
  fixed_length_record_reader(const std::string& node, int64_t header_bytes,
                             int64_t record_bytes, int64_t footer_bytes,
                             int64_t hop_bytes, std::string encoding)
    : reader_core("FixedLengthRecordReader '" + node + "'"),
      header_bytes_(static_cast<size_t>(header_bytes)),
      record_bytes_(static_cast<size_t>(record_bytes)),
      footer_bytes_(static_cast<size_t>(footer_bytes)),
      // 0 means records follow each other.
      hop_bytes_(static_cast<size_t>(hop_bytes == 0 ? record_bytes
                                                    : hop_bytes)),
      encoding_(std::move(encoding)) {
    // nop
  }

protected:
  status on_work_started() override {
    record_number_ = 0;
    lookahead_.clear();
    std::unique_ptr<byte_source> src;
    if (encoding_.empty()) {
      auto file = std::make_unique<file_source>();
      if (auto st = file->open(name(), current_work()); !st.ok())
        return st;
      src = std::move(file);
    } else {
      auto z = std::make_unique<zlib_source>(encoding_ == "GZIP");
      if (auto st = z->open(name(), current_work()); !st.ok())
        return st;
      src = std::move(z);
    }
    input_ = std::make_unique<input_buffer>(std::move(src));
    bool complete = false;
    if (auto st = input_->read_n(header_bytes_, nullptr, complete); !st.ok())
      return st;
    // TF fails the work unit when the header is cut short (the messages
    // of RandomAccessInputStream and ZlibInputStream).
    if (!complete)
      return out_of_range(encoding_.empty() ? "reached end of file"
                                            : "EOF reached");
    return {};
  }

  void on_work_finished() override {
    input_.reset();
    lookahead_.clear();
  }

  status read_up_to_locked(int64_t n, std::vector<std::string>& keys,
                           std::vector<std::string>& values,
                           int64_t& produced, bool& at_end) override {
    while (produced < n) {
      if (auto st = read_one(keys, values, at_end); !st.ok() || at_end)
        return st;
      ++produced;
    }
    return {};
  }

private:
  // TF's ReadLocked. The lookahead holds record + footer bytes, so a
  // record counts only when a whole footer still follows it, without
  // knowing the (inflated) size up front; a trailing partial record ends
  // the work unit silently.
  status read_one(std::vector<std::string>& keys,
                  std::vector<std::string>& values, bool& at_end) {
    if (record_number_ != 0) {
      if (hop_bytes_ <= lookahead_.size()) {
        lookahead_.erase(0, hop_bytes_);
      } else {
        auto skip = hop_bytes_ - lookahead_.size();
        lookahead_.clear();
        bool complete = false;
        if (auto st = input_->read_n(skip, nullptr, complete); !st.ok())
          return st;
        if (!complete) {
          at_end = true;
          return {};
        }
      }
    }
    auto have = lookahead_.size();
    auto want = record_bytes_ + footer_bytes_;
    bool complete = false;
    auto st = input_->read_n(want - have, &lookahead_, complete);
    if (!st.ok() || !complete) {
      lookahead_.resize(have);
      at_end = st.ok();
      return st;
    }
    values.emplace_back(lookahead_, 0, record_bytes_);
    keys.push_back(record_key(current_work(), record_number_));
    ++record_number_;
    return {};
  }

  size_t header_bytes_;
  size_t record_bytes_;
  size_t footer_bytes_;
  size_t hop_bytes_;
  std::string encoding_;
  int64_t record_number_ = 0;
  std::string lookahead_;
  std::unique_ptr<input_buffer> input_;
};

// TF's ReadEntireFile.
status read_entire_file(const std::string& who, const std::string& path,
                        std::string& out) {
  posix_file file;
  if (auto st = file.open(who, path); !st.ok())
    return st;
  out.clear();
  out.reserve(file.size_hint());
  std::vector<char> buf(1 << 20);
  for (;;) {
    size_t got = 0;
    if (auto st = file.read(buf.data(), buf.size(), got); !st.ok())
      return st;
    if (got == 0)
      return {};
    out.append(buf.data(), got);
  }
}

class whole_file_reader final : public reader_core {
public:
  explicit whole_file_reader(const std::string& node)
    : reader_core("WholeFileReader '" + node + "'") {
    // nop
  }

protected:
  // As TF, the file is opened when read, so a missing file fails the read
  // and stays the current work unit.
  status on_work_started() override {
    return {};
  }

  void on_work_finished() override {
    // nop
  }

  status read_up_to_locked(int64_t, std::vector<std::string>& keys,
                           std::vector<std::string>& values,
                           int64_t& produced, bool& at_end) override {
    std::string contents;
    if (auto st = read_entire_file(name(), current_work(), contents); !st.ok())
      return st;
    keys.push_back(current_work());
    values.push_back(std::move(contents));
    produced = 1;
    at_end = true;
    return {};
  }
};

} // namespace

reader_core::~reader_core() = default;

status reader_core::make(const node_def& node,
                         std::unique_ptr<reader_core>& out) {
  auto bad = [&](const std::string& msg) {
    return invalid_argument(msg + " [[node " + node.name + "]]");
  };
  try {
    const auto& op = node.op;
    if (op == "TextLineReaderV2" || op == "TextLineReader") {
      auto skip = node.attr_or<int64_t>("skip_header_lines", 0);
      if (skip < 0)
        return bad("skip_header_lines must be >= 0 not "
                   + std::to_string(skip));
      out = std::make_unique<text_line_reader>(node.name, skip);
      return {};
    }
    if (op == "FixedLengthRecordReaderV2" || op == "FixedLengthRecordReader") {
      auto header = node.attr_or<int64_t>("header_bytes", 0);
      auto record = node.attr_or<int64_t>("record_bytes", 0);
      auto footer = node.attr_or<int64_t>("footer_bytes", 0);
      auto hop = node.attr_or<int64_t>("hop_bytes", 0);
      auto encoding = node.attr_or<std::string>("encoding", "");
      // TF checks header, record, footer, hop in this order. It allows
      // record_bytes 0, which would produce empty records forever.
      if (header < 0)
        return bad("header_bytes must be >= 0 not " + std::to_string(header));
      if (record <= 0)
        return bad("record_bytes must be > 0 not " + std::to_string(record));
      if (footer < 0)
        return bad("footer_bytes must be >= 0 not " + std::to_string(footer));
      if (hop < 0)
        return bad("hop_bytes must be >= 0 not " + std::to_string(hop));
      // TF reads any other encoding as uncompressed; a typo would then
      // yield compressed bytes as records.
      if (!encoding.empty() && encoding != "ZLIB" && encoding != "GZIP")
        return bad("encoding must be \"\", \"ZLIB\" or \"GZIP\", not \""
                   + encoding + "\"");
      out = std::make_unique<fixed_length_record_reader>(
        node.name, header, record, footer, hop, std::move(encoding));
      return {};
    }
    if (op == "WholeFileReaderV2" || op == "WholeFileReader") {
      out = std::make_unique<whole_file_reader>(node.name);
      return {};
    }
    return bad("op '" + op + "' is not a reader");
  } catch (const op_error& e) {
    return {e.code(), e.get_status().message() + " [[node " + node.name
                        + "]]"};
  }
}

bool reader_core::advance(request& req) {
  if (req.up_to && req.num_records < 0) {
    req.result = invalid_argument("num_records must be >= 0 not "
                                  + std::to_string(req.num_records));
    return true;
  }
  const auto wanted = req.up_to ? req.num_records : int64_t{1};
  auto fail = [&](status st) {
    // The op fails, so its outputs (records of this call) are dropped.
    req.keys.clear();
    req.values.clear();
    req.result = std::move(st);
    return true;
  };
  for (;;) {
    auto so_far = static_cast<int64_t>(req.keys.size());
    if (so_far >= wanted) {
      req.result = {};
      return true;
    }
    if (!work_in_progress())
      return false;
    int64_t produced = 0;
    bool at_end = false;
    auto st = read_up_to_locked(wanted - so_far, req.keys, req.values,
                                produced, at_end);
    records_produced_ += produced;
    if (st.ok() && !at_end && produced == 0)
      return fail(internal_error(
        (req.up_to ? "ReadManyLocked() for " : "ReadLocked() for ") + name_
        + (req.up_to
             ? " must set *at_end=true, *num_produced > 0 or return an error."
             : " must set *at_end=true, *produced=true, or return an "
               "error.")));
    if (!st.ok() && produced > 0 && !req.up_to)
      return fail(internal_error("ReadLocked() for " + name_
                                 + " set *produced=true *and* returned an "
                                   "error: "
                                 + st.message()));
    if (st.ok() && at_end) {
      on_work_finished();
      work_finished_ = work_started_;
      // A read_up_to returns what this work unit gave rather than pull the
      // next one.
      if (!req.keys.empty()) {
        req.result = {};
        return true;
      }
    }
    if (!st.ok())
      return fail(std::move(st));
  }
}

status reader_core::start_work(const std::string& work) {
  if (work_in_progress())
    return internal_error(name_ + " cannot start work unit '" + work
                          + "' before finishing '" + work_ + "'");
  work_ = work;
  if (auto st = on_work_started(); !st.ok()) {
    // Not counted as started (TF), so the next read takes the next unit.
    on_work_finished();
    work_.clear();
    return st;
  }
  ++work_started_;
  return {};
}

status reader_core::work_from_tuple(const std::vector<tensor>& tuple,
                                    std::string& work) {
  if (tuple.size() != 1)
    return invalid_argument("Expected single component queue");
  if (tuple[0].type() != dtype::string)
    return invalid_argument("Expected queue with single string component");
  if (tuple[0].num_elements() != 1)
    return invalid_argument("Expected to dequeue a one-element string tensor");
  work = tuple[0].flat<std::string>()[0];
  return {};
}

void reader_core::reset() {
  on_work_finished();
  work_.clear();
  records_produced_ = 0;
  work_started_ = 0;
  work_finished_ = 0;
}

} // namespace actorflow
