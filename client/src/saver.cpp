#include "actorflow/client/saver.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <zlib.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string_view>
#include <system_error>
#include <unordered_map>
#include <utility>

#include <boost/archive/binary_iarchive.hpp>
#include <boost/archive/binary_oarchive.hpp>
#include <boost/serialization/binary_object.hpp>
#include <boost/serialization/level.hpp>
#include <boost/serialization/tracking.hpp>

#include "actorflow/graph/device_name.hpp"
#include "actorflow/graph/text_util.hpp"
#include "actorflow/graph/wire.hpp"
#include "actorflow/client/session.hpp"

namespace fs = std::filesystem;

namespace actorflow {

namespace {

// -- errors ---------------------------------------------------------------------

[[noreturn]] void fail(error_code code, std::string msg) {
  throw op_error(code, std::move(msg));
}

[[noreturn]] void invalid(std::string msg) {
  fail(error_code::invalid_argument, std::move(msg));
}

/// A failed system call on `path`, with TF's mapping of errno to codes.
[[noreturn]] void fs_fail(const std::string& what, const std::string& path,
                          int err) {
  auto code = error_code::unknown;
  switch (err) {
    case EACCES:
    case EPERM:
    case EROFS:
      code = error_code::permission_denied;
      break;
    case ENOSPC:
    case EDQUOT:
      code = error_code::resource_exhausted;
      break;
    case ENOENT:
      code = error_code::not_found;
      break;
    default:
      break;
  }
  fail(code, what + " " + path + ": " + std::strerror(err));
}

[[noreturn]] void data_loss(const std::string& file, const std::string& why) {
  fail(error_code::data_loss,
       "corrupt checkpoint file " + file + ": " + why);
}

// -- files ------------------------------------------------------------------------

uint64_t random_u64() {
  std::random_device rd;
  return (static_cast<uint64_t>(rd()) << 32) ^ static_cast<uint64_t>(rd());
}

std::string hex16(uint64_t x) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx",
                static_cast<unsigned long long>(x));
  return buf;
}

/// The directory of `path` ("" for a bare file name).
std::string dir_of(const std::string& path) {
  return fs::path(path).parent_path().string();
}

std::string join(const std::string& dir, const std::string& name) {
  if (dir.empty())
    return name;
  return (fs::path(dir) / name).string();
}

bool file_exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

/// fsync on a directory, so that renames in it survive a power loss.
/// Best effort: some filesystems refuse it.
void sync_dir(const std::string& dir) {
  auto name = dir.empty() ? std::string{"."} : dir;
  int fd = ::open(name.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    return;
  (void) ::fsync(fd);
  ::close(fd);
}

/// Writes `contents` to "<path>.tmp<hex>", flushes it to disk and renames
/// it over `path`: readers see the old file or the new one, never a part.
void write_atomically(const std::string& path, std::string_view contents) {
  auto tmp = path + ".tmp" + hex16(random_u64());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0)
    fs_fail("Failed to create", tmp, errno);
  auto abandon = [&](const char* what, int err) {
    ::close(fd);
    ::unlink(tmp.c_str());
    fs_fail(what, tmp, err);
  };
  const char* p = contents.data();
  size_t left = contents.size();
  while (left > 0) {
    auto n = ::write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      abandon("Failed to write", errno);
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0)
    abandon("Failed to sync", errno);
  if (::close(fd) != 0) {
    auto err = errno;
    ::unlink(tmp.c_str());
    fs_fail("Failed to close", tmp, err);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    auto err = errno;
    ::unlink(tmp.c_str());
    fs_fail("Failed to rename " + tmp + " to", path, err);
  }
}

/// The whole file; throws op_error naming it on failure.
std::string read_file(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    fs_fail("Failed to open", path, errno);
  std::string out;
  struct stat st {};
  if (::fstat(fd, &st) == 0 && st.st_size > 0)
    out.reserve(static_cast<size_t>(st.st_size));
  char buf[65536];
  for (;;) {
    auto n = ::read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      auto err = errno;
      ::close(fd);
      fs_fail("Failed to read", path, err);
    }
    if (n == 0)
      break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

// -- file framing -------------------------------------------------------------------

constexpr char frame_magic[4] = {'A', 'F', 'C', 'K'};
constexpr uint8_t frame_version = 1;
constexpr size_t frame_header_size = 40;
constexpr char kind_index = 'I';
constexpr char kind_data = 'D';

uint32_t crc32_of(std::string_view bytes) {
  auto crc = ::crc32(0L, Z_NULL, 0);
  const auto* p = reinterpret_cast<const Bytef*>(bytes.data());
  size_t left = bytes.size();
  while (left > 0) {
    auto n = static_cast<uInt>(std::min<size_t>(left, 1u << 30));
    crc = ::crc32(crc, p, n);
    p += n;
    left -= n;
  }
  return static_cast<uint32_t>(crc);
}

struct frame_info {
  char kind = 0;
  uint64_t id = 0;
  uint32_t shard = 0;
  uint32_t count = 0;
};

std::string frame(const frame_info& info, std::string_view payload) {
  std::string out;
  byte_writer w{out};
  w.reserve(frame_header_size + payload.size());
  w.raw(frame_magic, sizeof frame_magic);
  w.u8(static_cast<uint8_t>(info.kind));
  w.u8(frame_version);
  w.u8(0);
  w.u8(0);
  w.u64(info.id);
  w.u32(info.shard);
  w.u32(info.count);
  w.u64(payload.size());
  w.u32(crc32_of(payload));
  w.u32(crc32_of(std::string_view{out}.substr(0, 36)));
  w.raw(payload.data(), payload.size());
  return out;
}

std::string crc_text(uint32_t x) {
  char buf[11];
  std::snprintf(buf, sizeof buf, "0x%08x", x);
  return buf;
}

/// Checks the header of `bytes` (read from `file`) and returns the
/// payload; DataLoss naming the file for anything that does not check out.
std::string_view unframe(const std::string& file, std::string_view bytes,
                         char kind, frame_info& info) {
  if (bytes.size() < frame_header_size)
    data_loss(file, "truncated: " + std::to_string(bytes.size())
                      + " bytes, shorter than the "
                      + std::to_string(frame_header_size)
                      + "-byte header");
  byte_reader r{bytes};
  char magic[4];
  uint8_t k = 0;
  uint8_t version = 0;
  uint8_t reserved[2];
  uint64_t length = 0;
  uint32_t payload_crc = 0;
  uint32_t header_crc = 0;
  r.raw(magic, sizeof magic);
  r.u8(k);
  r.u8(version);
  r.raw(reserved, sizeof reserved);
  r.u64(info.id);
  r.u32(info.shard);
  r.u32(info.count);
  r.u64(length);
  r.u32(payload_crc);
  r.u32(header_crc);
  if (std::memcmp(magic, frame_magic, sizeof magic) != 0)
    data_loss(file, "not an actorflow checkpoint file (bad magic)");
  auto actual_header_crc = crc32_of(bytes.substr(0, 36));
  if (header_crc != actual_header_crc)
    data_loss(file, "header checksum does not match: stored "
                      + crc_text(header_crc) + " vs. calculated "
                      + crc_text(actual_header_crc));
  if (version != frame_version)
    data_loss(file, "unsupported format version " + std::to_string(version));
  if (static_cast<char>(k) != kind)
    data_loss(file, std::string{"expected a"}
                      + (kind == kind_index ? "n index" : " data shard")
                      + " file, found kind '"
                      + std::string(1, static_cast<char>(k)) + "'");
  auto available = bytes.size() - frame_header_size;
  if (length > available)
    data_loss(file, "truncated: payload of " + std::to_string(length)
                      + " bytes, " + std::to_string(available)
                      + " present");
  if (length < available)
    data_loss(file, std::to_string(available - length)
                      + " trailing bytes after the payload");
  auto payload = bytes.substr(frame_header_size);
  auto actual_crc = crc32_of(payload);
  if (payload_crc != actual_crc)
    data_loss(file, "checksum does not match: stored " + crc_text(payload_crc)
                      + " vs. calculated on the restored bytes "
                      + crc_text(actual_crc));
  info.kind = static_cast<char>(k);
  return payload;
}

// -- archive payloads (Boost.Serialization) -------------------------------------
//
// Strings and sequences go through `field`, which bounds every length read
// back by the payload size before allocating: even a payload that passed
// its CRC but was not written by us cannot make the loader allocate more
// than the file holds.

thread_local uint64_t load_limit = 0;

struct length_error_in_archive : std::runtime_error {
  using std::runtime_error::runtime_error;
};

void check_length(uint64_t n) {
  if (n > load_limit)
    throw length_error_in_archive("length " + std::to_string(n)
                                  + " exceeds the payload size "
                                  + std::to_string(load_limit));
}

template <class Ar, class T>
  requires std::is_arithmetic_v<T>
void field(Ar& ar, T& x) {
  ar & x;
}

template <class Ar>
void field(Ar& ar, std::string& s) {
  if constexpr (Ar::is_saving::value) {
    uint64_t n = s.size();
    ar & n;
    if (n > 0) {
      auto bytes = boost::serialization::make_binary_object(s.data(), s.size());
      ar & bytes;
    }
  } else {
    uint64_t n = 0;
    ar & n;
    check_length(n);
    s.resize(static_cast<size_t>(n));
    if (n > 0) {
      auto bytes = boost::serialization::make_binary_object(s.data(), s.size());
      ar & bytes;
    }
  }
}

template <class Ar, class T>
  requires std::is_class_v<T>
void field(Ar& ar, T& x) {
  ar & x;
}

template <class Ar, class T>
void field(Ar& ar, std::vector<T>& xs) {
  if constexpr (Ar::is_saving::value) {
    uint64_t n = xs.size();
    ar & n;
    for (auto& x : xs)
      field(ar, x);
  } else {
    uint64_t n = 0;
    ar & n;
    check_length(n);
    xs.clear();
    for (uint64_t i = 0; i < n; ++i) {
      T x{};
      field(ar, x);
      xs.push_back(std::move(x));
    }
  }
}

struct shard_desc {
  std::string device;
  template <class Ar>
  void serialize(Ar& ar, unsigned) {
    field(ar, device);
  }
};

struct index_entry {
  std::string key;
  uint8_t type = 0;
  std::vector<int64_t> dims;
  uint32_t shard = 0;
  template <class Ar>
  void serialize(Ar& ar, unsigned) {
    field(ar, key);
    field(ar, type);
    field(ar, dims);
    field(ar, shard);
  }
};

struct index_payload {
  std::vector<shard_desc> shards;
  std::vector<index_entry> entries;
  template <class Ar>
  void serialize(Ar& ar, unsigned) {
    field(ar, shards);
    field(ar, entries);
  }
};

struct data_record {
  std::string key;
  /// The tensor, as wire's to_bytes.
  std::string value;
  template <class Ar>
  void serialize(Ar& ar, unsigned) {
    field(ar, key);
    field(ar, value);
  }
};

struct data_payload {
  std::vector<data_record> records;
  template <class Ar>
  void serialize(Ar& ar, unsigned) {
    field(ar, records);
  }
};

} // namespace
} // namespace actorflow

// Plain objects: no class information, version or tracking in the archive,
// so a payload holds only what `field` writes.
#define ACTORFLOW_CKPT_PLAIN(T)                                              \
  BOOST_CLASS_IMPLEMENTATION(T, boost::serialization::object_serializable) \
  BOOST_CLASS_TRACKING(T, boost::serialization::track_never)
ACTORFLOW_CKPT_PLAIN(actorflow::shard_desc)
ACTORFLOW_CKPT_PLAIN(actorflow::index_entry)
ACTORFLOW_CKPT_PLAIN(actorflow::index_payload)
ACTORFLOW_CKPT_PLAIN(actorflow::data_record)
ACTORFLOW_CKPT_PLAIN(actorflow::data_payload)
#undef ACTORFLOW_CKPT_PLAIN

namespace actorflow {
namespace {

template <class T>
std::string to_archive(T& x) {
  std::ostringstream os{std::ios::binary};
  {
    boost::archive::binary_oarchive ar{os, boost::archive::no_header};
    ar << x;
  }
  return std::move(os).str();
}

/// Loads `x` from `payload`; DataLoss naming `file` for whatever the
/// archive rejects.
template <class T>
void from_archive(const std::string& file, std::string_view payload, T& x) {
  struct limit_guard {
    uint64_t prev;
    explicit limit_guard(uint64_t n) : prev(load_limit) {
      load_limit = n;
    }
    ~limit_guard() {
      load_limit = prev;
    }
  } guard{payload.size()};
  std::string why;
  try {
    std::istringstream is{std::string{payload}, std::ios::binary};
    boost::archive::binary_iarchive ar{is, boost::archive::no_header};
    ar >> x;
    if (is.peek() != std::char_traits<char>::eof())
      why = "trailing bytes after the archive";
  } catch (const boost::archive::archive_exception& e) {
    why = std::string{"archive error: "} + e.what();
  } catch (const std::exception& e) {
    why = std::string{"archive error: "} + e.what();
  }
  if (!why.empty())
    data_loss(file, why);
}

// -- checkpoint files -------------------------------------------------------------

std::string five_digits(uint32_t x) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%05u", x);
  return buf;
}

std::string data_file(const std::string& prefix, uint32_t shard,
                      uint32_t count) {
  return prefix + ".data-" + five_digits(shard) + "-of-"
         + five_digits(count);
}

/// If `name` is "<base>.data-NNNNN-of-MMMMM", sets `count` to MMMMM.
bool is_data_file_of(std::string_view name, std::string_view base,
                     uint32_t& count) {
  auto head = std::string{base} + ".data-";
  if (name.size() != head.size() + 14 || name.substr(0, head.size()) != head)
    return false;
  auto rest = name.substr(head.size());
  auto digits = [](std::string_view s) {
    return std::all_of(s.begin(), s.end(),
                       [](char c) { return c >= '0' && c <= '9'; });
  };
  if (!digits(rest.substr(0, 5)) || rest.substr(5, 4) != "-of-"
      || !digits(rest.substr(9, 5)))
    return false;
  count = static_cast<uint32_t>(std::stoul(std::string{rest.substr(9, 5)}));
  return true;
}

/// Removes the data files of `prefix` for which `pred(count)` holds.
/// Failures are ignored (TF only logs them).
template <class Pred>
void remove_data_files(const std::string& prefix, Pred pred) {
  auto dir = dir_of(prefix);
  auto base = fs::path(prefix).filename().string();
  std::error_code ec;
  std::vector<fs::path> doomed;
  for (fs::directory_iterator it{dir.empty() ? fs::path{"."} : fs::path{dir},
                                 ec},
       end;
       !ec && it != end; it.increment(ec)) {
    uint32_t count = 0;
    auto name = it->path().filename().string();
    if (is_data_file_of(name, base, count) && pred(count))
      doomed.push_back(it->path());
  }
  for (auto& p : doomed)
    fs::remove(p, ec);
}

/// TF's remove_checkpoint: the index first (so the checkpoint stops being
/// valid at once), then the shards.
void remove_checkpoint(const std::string& prefix) {
  std::error_code ec;
  fs::remove(prefix + ".index", ec);
  remove_data_files(prefix, [](uint32_t) { return true; });
}

// -- the CheckpointState text file ---------------------------------------------------

std::string state_text(const checkpoint_state& st) {
  std::string out = "model_checkpoint_path: \""
                    + c_escape(st.model_checkpoint_path) + "\"\n";
  for (auto& p : st.all_model_checkpoint_paths)
    out += "all_model_checkpoint_paths: \"" + c_escape(p) + "\"\n";
  return out;
}

/// A parser for the text format of CheckpointState, as TF's text_format
/// reads it: `field: "string"` pairs (adjacent string literals concatenate,
/// single quotes allowed, C escapes), `#` comments, and the numeric
/// timestamp fields of newer releases (ignored). False for anything else.
class state_parser {
public:
  explicit state_parser(std::string_view text) : s_(text) {
  }

  bool parse(checkpoint_state& st) {
    for (;;) {
      skip_space();
      if (pos_ == s_.size())
        return true;
      auto name = identifier();
      skip_space();
      if (name.empty() || !eat(':'))
        return false;
      skip_space();
      if (name == "model_checkpoint_path") {
        if (!string_value(st.model_checkpoint_path))
          return false;
      } else if (name == "all_model_checkpoint_paths") {
        std::string p;
        if (!string_value(p))
          return false;
        st.all_model_checkpoint_paths.push_back(std::move(p));
      } else if (name == "all_model_checkpoint_timestamps"
                 || name == "last_preserved_timestamp") {
        if (!number())
          return false;
      } else {
        return false;
      }
      skip_space();
      if (pos_ < s_.size() && (s_[pos_] == ',' || s_[pos_] == ';'))
        ++pos_;
    }
  }

private:
  void skip_space() {
    while (pos_ < s_.size()) {
      auto c = s_[pos_];
      if (c == '#') {
        while (pos_ < s_.size() && s_[pos_] != '\n')
          ++pos_;
      } else if (c == ' ' || c == '\t' || c == '\n' || c == '\r'
                 || c == '\f' || c == '\v') {
        ++pos_;
      } else {
        return;
      }
    }
  }

  bool eat(char c) {
    if (pos_ < s_.size() && s_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }

  std::string identifier() {
    auto start = pos_;
    while (pos_ < s_.size()
           && (std::isalnum(static_cast<unsigned char>(s_[pos_]))
               || s_[pos_] == '_'))
      ++pos_;
    return std::string{s_.substr(start, pos_ - start)};
  }

  bool number() {
    auto start = pos_;
    while (pos_ < s_.size()
           && (std::isalnum(static_cast<unsigned char>(s_[pos_]))
               || s_[pos_] == '.' || s_[pos_] == '-' || s_[pos_] == '+'))
      ++pos_;
    return pos_ > start;
  }

  static int hex_digit(char c) {
    if (c >= '0' && c <= '9')
      return c - '0';
    if (c >= 'a' && c <= 'f')
      return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
      return c - 'A' + 10;
    return -1;
  }

  // One or more adjacent string literals.
  bool string_value(std::string& out) {
    out.clear();
    bool any = false;
    for (;;) {
      if (pos_ >= s_.size() || (s_[pos_] != '"' && s_[pos_] != '\''))
        return any;
      if (!literal(out))
        return false;
      any = true;
      auto save = pos_;
      skip_space();
      if (pos_ >= s_.size() || (s_[pos_] != '"' && s_[pos_] != '\'')) {
        pos_ = save;
        return true;
      }
    }
  }

  bool literal(std::string& out) {
    auto quote = s_[pos_++];
    while (pos_ < s_.size()) {
      auto c = s_[pos_++];
      if (c == quote)
        return true;
      if (c == '\n')
        return false;
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos_ >= s_.size())
        return false;
      auto e = s_[pos_++];
      switch (e) {
        case 'n':
          out += '\n';
          break;
        case 'r':
          out += '\r';
          break;
        case 't':
          out += '\t';
          break;
        case 'a':
          out += '\a';
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'v':
          out += '\v';
          break;
        case '\\':
        case '\'':
        case '"':
        case '?':
          out += e;
          break;
        case 'x': {
          int v = 0;
          int n = 0;
          while (n < 2 && pos_ < s_.size() && hex_digit(s_[pos_]) >= 0) {
            v = v * 16 + hex_digit(s_[pos_++]);
            ++n;
          }
          if (n == 0)
            return false;
          out += static_cast<char>(v);
          break;
        }
        default:
          if (e >= '0' && e <= '7') {
            int v = e - '0';
            int n = 1;
            while (n < 3 && pos_ < s_.size() && s_[pos_] >= '0'
                   && s_[pos_] <= '7') {
              v = v * 8 + (s_[pos_++] - '0');
              ++n;
            }
            out += static_cast<char>(v);
          } else {
            return false;
          }
      }
    }
    return false;
  }

  std::string_view s_;
  size_t pos_ = 0;
};

/// os.path.relpath(p, dir) for the state file; `p` itself if that fails.
std::string relative_to(const std::string& p, const std::string& dir) {
  auto base = dir.empty() ? fs::path{"."} : fs::path{dir};
  auto rel = fs::path(p).lexically_normal().lexically_relative(
    base.lexically_normal());
  return rel.empty() ? p : rel.string();
}

/// TF's update_checkpoint_state_internal (plus
/// generate_checkpoint_state_proto) for `save_dir`.
void update_checkpoint_state(const std::string& save_dir,
                             std::string model_path,
                             std::vector<std::string> all_paths,
                             bool save_relative_paths) {
  if (all_paths.empty() || all_paths.back() != model_path)
    all_paths.push_back(model_path);
  auto dir_relative = !fs::path(save_dir).is_absolute();
  auto fix = [&](std::string& p) {
    auto abs = fs::path(p).is_absolute();
    if ((abs && save_relative_paths) || (!abs && dir_relative))
      p = relative_to(p, save_dir);
  };
  fix(model_path);
  for (auto& p : all_paths)
    fix(p);
  checkpoint_state st{std::move(model_path), std::move(all_paths)};
  write_atomically(join(save_dir, "checkpoint"), state_text(st));
  sync_dir(save_dir);
}

/// Shard key of a variable: the job, replica and task of its device (one
/// file per process); "" when it has none.
std::string shard_device(const variable& v) {
  device_name dn;
  if (!device_name::parse(v.device(), dn).ok())
    return v.device();
  device_name key;
  key.job = dn.job;
  key.replica = dn.replica;
  key.task = dn.task;
  return key.to_string();
}

} // namespace

// -- saver --------------------------------------------------------------------------

saver::saver(saver_options opts) : opts_(std::move(opts)) {
  vars_ = opts_.var_list.empty() ? global_variables() : opts_.var_list;
  opts_.var_list.clear();
  if (vars_.empty())
    invalid("No variables to save");
  for (auto& v : vars_)
    if (!v.valid())
      invalid("saver: var_list holds an invalid variable");
  graph_ = vars_.front().op().owner();
  std::set<std::string> seen;
  for (auto& v : vars_) {
    if (v.op().owner() != graph_)
      invalid("saver: variables " + vars_.front().op().name() + " and "
              + v.op().name() + " belong to different graphs");
    auto key = v.op().name();
    if (!seen.insert(key).second)
      invalid("At least two variables have the same name: " + key);
    keys_.push_back(std::move(key));
  }
  auto as_default = graph_->as_default();
  control_dependencies no_deps{nullptr};
  name_scope scope{opts_.name};
  std::vector<operation> assigns;
  for (auto& v : vars_) {
    colocate_with near{v.op()};
    auto shape = v.shape();
    auto value = placeholder(v.type(), shape);
    auto assign = v.assign(value, shape.fully_defined());
    restore_feeds_.push_back(value);
    assigns.push_back(assign.op());
  }
  restore_all_ = group(assigns, "restore_all");
}

saver::~saver() = default;

std::string saver::save(session& sess, const std::string& save_path,
                        int64_t global_step) {
  return save_impl(sess, save_path, nullptr, global_step);
}

std::string saver::save(session& sess, const std::string& save_path,
                        const variable& global_step) {
  if (!global_step.valid())
    invalid("saver: invalid global_step variable");
  return save_impl(sess, save_path, &global_step, -1);
}

std::string saver::save_impl(session& sess, const std::string& save_path,
                             const variable* step_var, int64_t global_step) {
  if (save_path.empty())
    invalid("Can't save: save_path is empty.");
  auto save_dir = dir_of(save_path);
  std::error_code ec;
  if (!fs::is_directory(save_dir.empty() ? fs::path{"."} : fs::path{save_dir},
                        ec))
    invalid("Parent directory of " + save_path
            + " doesn't exist, can't save.");
  // One step fetches every value (and the step, if asked for).
  std::vector<fetch> fetches;
  for (auto& v : vars_)
    fetches.emplace_back(v);
  size_t step_slot = 0;
  if (step_var != nullptr) {
    auto it = std::find_if(vars_.begin(), vars_.end(), [&](const variable& v) {
      return v.op() == step_var->op();
    });
    step_slot = static_cast<size_t>(it - vars_.begin());
    if (it == vars_.end())
      fetches.emplace_back(*step_var);
  }
  auto values = sess.run(fetches);
  std::string ckpt = save_path;
  if (step_var != nullptr) {
    auto& t = values.at(step_slot);
    if (t.type() == dtype::int64 && t.num_elements() == 1)
      global_step = t.scalar_value<int64_t>();
    else if (t.type() == dtype::int32 && t.num_elements() == 1)
      global_step = t.scalar_value<int32_t>();
    else
      invalid("saver: global_step " + step_var->op().name()
              + " must be an integer scalar, got "
              + std::string{to_string(t.type())} + " "
              + t.shape().to_string());
    ckpt += "-" + std::to_string(global_step);
  } else if (global_step >= 0) {
    ckpt += "-" + std::to_string(global_step);
  }
  auto state_file = join(dir_of(ckpt), "checkpoint");
  if (ckpt == state_file)
    invalid("Save path '" + ckpt
            + "' conflicts with path used for checkpoint state.  Please use "
              "a different save path.");
  for (size_t i = 0; i < vars_.size(); ++i) {
    auto& t = values[i];
    if (!t.valid() || t.type() != vars_[i].type())
      fail(error_code::internal,
           "saver: the value fetched for " + keys_[i] + " has dtype "
             + std::string{to_string(t.type())} + ", expected "
             + std::string{to_string(vars_[i].type())});
  }
  // Group by device, in the order of the sorted device names.
  std::map<std::string, std::vector<size_t>> by_device;
  for (size_t i = 0; i < vars_.size(); ++i)
    by_device[opts_.sharded ? shard_device(vars_[i]) : std::string{}]
      .push_back(i);
  auto count = static_cast<uint32_t>(by_device.size());
  frame_info info;
  info.id = random_u64();
  info.count = count;
  index_payload index;
  uint32_t shard = 0;
  for (auto& [device, members] : by_device) {
    index.shards.push_back(shard_desc{device});
    data_payload data;
    for (auto i : members) {
      data.records.push_back(data_record{keys_[i], to_bytes(values[i])});
      index_entry e;
      e.key = keys_[i];
      e.type = static_cast<uint8_t>(values[i].type());
      e.dims = values[i].shape().dims();
      e.shard = shard;
      index.entries.push_back(std::move(e));
    }
    info.kind = kind_data;
    info.shard = shard;
    write_atomically(data_file(ckpt, shard, count),
                     frame(info, to_archive(data)));
    ++shard;
  }
  std::sort(index.entries.begin(), index.entries.end(),
            [](const index_entry& x, const index_entry& y) {
              return x.key < y.key;
            });
  info.kind = kind_index;
  info.shard = 0;
  // The index last: until it is in place the new checkpoint does not
  // exist for latest_checkpoint and restore.
  write_atomically(ckpt + ".index", frame(info, to_archive(index)));
  sync_dir(dir_of(ckpt));
  // Shards of an earlier save under this prefix with another shard count.
  remove_data_files(ckpt, [count](uint32_t n) { return n != count; });
  // TF's _RecordLastCheckpoint, update_checkpoint_state_internal and
  // _MaybeDeleteOldCheckpoints, in that order.
  // The list changes only once the state file names the new checkpoint.
  auto kept = last_checkpoints_;
  std::vector<std::string> doomed;
  if (opts_.max_to_keep > 0) {
    std::erase(kept, ckpt);
    kept.push_back(ckpt);
    while (kept.size() > static_cast<size_t>(opts_.max_to_keep)) {
      doomed.push_back(kept.front());
      kept.erase(kept.begin());
    }
  }
  update_checkpoint_state(save_dir, ckpt, kept, opts_.save_relative_paths);
  last_checkpoints_ = std::move(kept);
  for (auto& p : doomed)
    remove_checkpoint(p);
  return ckpt;
}

void saver::restore(session& sess, const std::string& save_path) {
  if (save_path.empty())
    invalid("Can't load save_path when it is empty.");
  auto index_file = save_path + ".index";
  if (!file_exists(index_file))
    invalid("The passed save_path is not a valid checkpoint: " + save_path);
  auto index_bytes = read_file(index_file);
  frame_info index_info;
  auto index_raw = unframe(index_file, index_bytes, kind_index, index_info);
  index_payload index;
  from_archive(index_file, index_raw, index);
  // The index must describe a consistent checkpoint.
  auto count = index_info.count;
  if (count == 0 || index.shards.size() != count)
    data_loss(index_file, "lists " + std::to_string(index.shards.size())
                            + " shards, the header says "
                            + std::to_string(count));
  std::unordered_map<std::string, const index_entry*> entries;
  for (auto& e : index.entries) {
    if (e.shard >= count)
      data_loss(index_file, "entry " + e.key + " names shard "
                              + std::to_string(e.shard) + " of "
                              + std::to_string(count));
    if (!known_dtype(e.type))
      data_loss(index_file, "entry " + e.key + " has unknown dtype "
                              + std::to_string(e.type));
    if (std::any_of(e.dims.begin(), e.dims.end(),
                    [](int64_t d) { return d < 0; }))
      data_loss(index_file, "entry " + e.key + " has a negative dimension");
    if (!entries.emplace(e.key, &e).second)
      data_loss(index_file, "duplicate entry " + e.key);
  }
  // Every variable must be there with its dtype and shape.
  std::vector<const index_entry*> wanted;
  std::map<uint32_t, std::vector<size_t>> by_shard;
  for (size_t i = 0; i < vars_.size(); ++i) {
    auto& key = keys_[i];
    auto it = entries.find(key);
    if (it == entries.end())
      fail(error_code::not_found, "Key " + key
                                    + " not found in checkpoint "
                                    + save_path);
    auto& e = *it->second;
    auto want = vars_[i].type();
    auto have = static_cast<dtype>(e.type);
    if (want != have)
      invalid("tensor_name = " + key + "; expected dtype "
              + std::string{tf_type_name(want)}
              + " does not equal original dtype "
              + std::string{tf_type_name(have)} + " (checkpoint "
              + save_path + ")");
    auto lhs = vars_[i].shape();
    tensor_shape rhs{e.dims};
    if (lhs.fully_defined() ? !(lhs == rhs) : !lhs.is_compatible_with(rhs))
      invalid("Assign requires shapes of both tensors to match. lhs shape= "
              + lhs.to_string() + " rhs shape= " + rhs.to_string()
              + " (restoring " + key + " from " + save_path + ")");
    wanted.push_back(&e);
    by_shard[e.shard].push_back(i);
  }
  // Read and check the shards holding them.
  std::vector<tensor> restored(vars_.size());
  for (auto& [shard, members] : by_shard) {
    auto file = data_file(save_path, shard, count);
    auto bytes = read_file(file);
    frame_info info;
    auto raw = unframe(file, bytes, kind_data, info);
    if (info.id != index_info.id)
      data_loss(file, "the shard belongs to another save than "
                        + index_file + " (checkpoint id "
                        + hex16(info.id) + " vs. " + hex16(index_info.id)
                        + ")");
    if (info.shard != shard || info.count != count)
      data_loss(file, "the header says shard " + std::to_string(info.shard)
                        + " of " + std::to_string(info.count));
    data_payload data;
    from_archive(file, raw, data);
    std::unordered_map<std::string, const data_record*> records;
    for (auto& r : data.records)
      if (!records.emplace(r.key, &r).second)
        data_loss(file, "duplicate record " + r.key);
    for (auto i : members) {
      auto& key = keys_[i];
      auto it = records.find(key);
      if (it == records.end())
        data_loss(file, "no record for " + key + ", which "
                          + index_file + " places there");
      tensor t;
      auto st = from_bytes(it->second->value, t);
      if (!st.ok())
        data_loss(file, key + ": " + st.message());
      auto& e = *wanted[i];
      if (t.type() != static_cast<dtype>(e.type)
          || !(t.shape() == tensor_shape{e.dims}))
        data_loss(file, key + " holds a " + std::string{to_string(t.type())}
                          + " " + t.shape().to_string()
                          + " tensor, the index says "
                          + std::string{to_string(static_cast<dtype>(e.type))}
                          + " " + tensor_shape{e.dims}.to_string());
      restored[i] = std::move(t);
    }
  }
  feed_dict feeds;
  feeds.reserve(vars_.size());
  for (size_t i = 0; i < vars_.size(); ++i)
    feeds.emplace_back(restore_feeds_[i], std::move(restored[i]));
  sess.run(std::vector<fetch>{restore_all_}, feeds);
}

void saver::recover_last_checkpoints(const std::vector<std::string>& paths) {
  last_checkpoints_.clear();
  for (auto& p : paths)
    if (checkpoint_exists(p)) {
      std::erase(last_checkpoints_, p);
      last_checkpoints_.push_back(p);
    }
}

// -- free functions -----------------------------------------------------------------

std::optional<checkpoint_state>
get_checkpoint_state(const std::string& checkpoint_dir) {
  auto file = join(checkpoint_dir, "checkpoint");
  if (!file_exists(file))
    return std::nullopt;
  std::string text;
  try {
    text = read_file(file);
  } catch (const op_error&) {
    return std::nullopt;
  }
  checkpoint_state st;
  if (!state_parser{text}.parse(st) || st.model_checkpoint_path.empty())
    return std::nullopt;
  auto absolutize = [&](std::string& p) {
    if (!fs::path(p).is_absolute())
      p = join(checkpoint_dir, p);
  };
  absolutize(st.model_checkpoint_path);
  for (auto& p : st.all_model_checkpoint_paths)
    absolutize(p);
  return st;
}

std::string latest_checkpoint(const std::string& checkpoint_dir) {
  auto st = get_checkpoint_state(checkpoint_dir);
  if (!st || !checkpoint_exists(st->model_checkpoint_path))
    return {};
  return st->model_checkpoint_path;
}

bool checkpoint_exists(const std::string& path) {
  return !path.empty() && file_exists(path + ".index");
}

} // namespace actorflow
