#include "actorflow/graph/device_name.hpp"

#include "actorflow/graph/text_util.hpp"

#include <charconv>
#include <climits>
#include <vector>

namespace actorflow {

namespace {

bool is_alpha(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z');
}

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

bool is_alnum_or_underscore(char c) {
  return is_alpha(c) || is_digit(c) || c == '_';
}

bool consume_prefix(std::string_view& in, std::string_view prefix) {
  if (in.substr(0, prefix.size()) != prefix)
    return false;
  in.remove_prefix(prefix.size());
  return true;
}

// TF's ConsumePrefix: a letter, then letters, digits or underscores up to
// the first terminator (or the end). Any other character fails the whole
// name rather than ending the token.
bool consume_identifier(std::string_view& in, std::string_view terminators,
                        std::string& out) {
  if (in.empty() || !is_alpha(in.front()))
    return false;
  auto end = in.find_first_of(terminators);
  if (end == std::string_view::npos)
    end = in.size();
  for (size_t i = 0; i < end; ++i)
    if (!is_alnum_or_underscore(in[i]))
      return false;
  out.assign(in.substr(0, end));
  in.remove_prefix(end);
  return true;
}

// TF's ConsumeNumber: leading decimal digits, no sign. TF truncates values
// beyond int into garbage; we reject them instead.
bool consume_number(std::string_view& in, int& out) {
  size_t n = 0;
  while (n < in.size() && is_digit(in[n]))
    ++n;
  if (n == 0)
    return false;
  int value = 0;
  auto [ptr, ec] = std::from_chars(in.data(), in.data() + n, value);
  if (ec != std::errc{} || ptr != in.data() + n)
    return false;
  out = value;
  in.remove_prefix(n);
  return true;
}

// Parses `/<number>|*` after a component keyword; leaves `field` unset for
// `*`.
bool consume_number_or_star(std::string_view& in, std::optional<int>& field) {
  if (consume_prefix(in, "*")) {
    field.reset();
    return true;
  }
  int value = 0;
  if (!consume_number(in, value))
    return false;
  field = value;
  return true;
}

bool parse_full_name(std::string_view in, device_name& p) {
  p = device_name{};
  if (in == "/")
    return true;
  while (!in.empty()) {
    if (consume_prefix(in, "/job:")) {
      if (consume_prefix(in, "*")) {
        p.job.reset();
      } else {
        std::string job;
        if (!consume_identifier(in, "/", job))
          return false;
        p.job = std::move(job);
      }
    } else if (consume_prefix(in, "/replica:")) {
      if (!consume_number_or_star(in, p.replica))
        return false;
    } else if (consume_prefix(in, "/task:")) {
      if (!consume_number_or_star(in, p.task))
        return false;
    } else if (consume_prefix(in, "/device:")) {
      if (consume_prefix(in, "*")) {
        p.type.reset();
      } else {
        std::string type;
        if (!consume_identifier(in, "/:", type))
          return false;
        p.type = std::move(type);
      }
      // The id is optional here: "/device:GPU" names any GPU.
      if (consume_prefix(in, ":")) {
        if (!consume_number_or_star(in, p.id))
          return false;
      } else {
        p.id.reset();
      }
    } else if (consume_prefix(in, "/cpu:") || consume_prefix(in, "/CPU:")) {
      p.type = "CPU";
      if (!consume_number_or_star(in, p.id))
        return false;
    } else if (consume_prefix(in, "/gpu:") || consume_prefix(in, "/GPU:")) {
      p.type = "GPU";
      if (!consume_number_or_star(in, p.id))
        return false;
    } else {
      return false;
    }
  }
  return true;
}

std::vector<std::string_view> split(std::string_view text, char sep) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  for (;;) {
    auto pos = text.find(sep, start);
    if (pos == std::string_view::npos) {
      parts.push_back(text.substr(start));
      return parts;
    }
    parts.push_back(text.substr(start, pos - start));
    start = pos + 1;
  }
}

std::string upper(std::string_view text) {
  std::string out{text};
  for (auto& c : out)
    if (c >= 'a' && c <= 'z')
      c = static_cast<char>(c - 'a' + 'A');
  return out;
}

// Python's int(text) for a device field; int32 in the proto.
status py_int(std::string_view text, int& out) {
  bool out_of_range = false;
  auto value = parse_python_int(text, out_of_range);
  if (out_of_range)
    return invalid_argument("device field '" + std::string{text}
                            + "' is out of range");
  if (!value)
    return invalid_argument("invalid literal for int() with base 10: '"
                            + std::string{text} + "'");
  out = *value;
  return {};
}

status incompatible(std::string_view what, const device_name& a,
                    const device_name& b) {
  return invalid_argument("Cannot merge devices with incompatible "
                          + std::string{what} + ": '" + a.to_string()
                          + "' and '" + b.to_string() + "'");
}

} // namespace

status device_name::parse(std::string_view text, device_name& out) {
  device_name result;
  if (!parse_full_name(text, result))
    return invalid_argument("Malformed device name '" + std::string{text}
                            + "'");
  out = std::move(result);
  return {};
}

device_name device_name::parse_or_throw(std::string_view text) {
  device_name result;
  throw_if_error(parse(text, result));
  return result;
}

status device_name::parse_spec(std::string_view text, device_name& out) {
  device_name result;
  auto multiple = [&] {
    return invalid_argument("Cannot specify multiple device types: "
                            + std::string{text});
  };
  for (auto component : split(text, '/')) {
    auto y = split(component, ':');
    auto ly = y.size();
    if (ly == 2 && y[0] == "job") {
      result.job = std::string{y[1]};
    } else if (ly == 2 && (y[0] == "replica" || y[0] == "task")) {
      int value = 0;
      if (auto st = py_int(y[1], value); !st.ok())
        return st;
      (y[0] == "replica" ? result.replica : result.task) = value;
    } else if ((ly == 1 || ly == 2)
               && (upper(y[0]) == "GPU" || upper(y[0]) == "CPU")) {
      if (result.type)
        return multiple();
      result.type = upper(y[0]);
      if (ly == 2 && y[1] != "*") {
        int value = 0;
        if (auto st = py_int(y[1], value); !st.ok())
          return st;
        result.id = value;
      }
    } else if (ly == 3 && y[0] == "device") {
      if (result.type)
        return multiple();
      result.type = std::string{y[1]};
      if (y[2] != "*") {
        int value = 0;
        if (auto st = py_int(y[2], value); !st.ok())
          return st;
        result.id = value;
      }
    } else if (!y[0].empty()) {
      return invalid_argument("Unknown attribute: '" + std::string{y[0]}
                              + "' in '" + std::string{text} + "'");
    }
    // A component with an empty first field (from a leading or doubled '/')
    // is skipped, as Python does.
  }
  out = std::move(result);
  return {};
}

std::string device_name::to_string() const {
  std::string buf;
  if (job)
    buf += "/job:" + *job;
  if (replica)
    buf += "/replica:" + std::to_string(*replica);
  if (task)
    buf += "/task:" + std::to_string(*task);
  // An id without a type is not printable in TF's grammar; both TF printers
  // drop it.
  if (type)
    buf += "/device:" + *type + ":" + (id ? std::to_string(*id) : "*");
  return buf;
}

void device_name::merge_from(const device_name& other) {
  if (other.job)
    job = other.job;
  if (other.replica)
    replica = other.replica;
  if (other.task)
    task = other.task;
  if (other.type)
    type = other.type;
  if (other.id)
    id = other.id;
}

std::string task_name(std::string_view job, int task, int replica) {
  return "/job:" + std::string{job} + "/replica:" + std::to_string(replica)
         + "/task:" + std::to_string(task);
}

std::string task_of_device(std::string_view device) {
  device_name d;
  if (!device_name::parse(device, d).ok() || !d.job || !d.task)
    return {};
  return task_name(*d.job, *d.task, d.replica.value_or(0));
}

std::string full_device_name(std::string_view job, int replica, int task,
                             std::string_view type, int id) {
  return task_name(job, task, replica) + "/device:" + std::string{type} + ":"
         + std::to_string(id);
}

bool is_specification(const device_name& less, const device_name& more) {
  // Every field set in `less` must be set to the same value in `more`.
  auto covers = [](const auto& l, const auto& m) { return !l || l == m; };
  return covers(less.job, more.job) && covers(less.replica, more.replica)
         && covers(less.task, more.task) && covers(less.type, more.type)
         && covers(less.id, more.id);
}

status merge_device_names(device_name& target, const device_name& other,
                          bool allow_soft_placement) {
  // TF mutates the target field by field and may leave it half merged on
  // error; we merge into a copy so a failure leaves `target` untouched.
  auto result = target;
  if (other.job) {
    if (result.job && result.job != other.job)
      return incompatible("jobs", result, other);
    result.job = other.job;
  }
  if (other.replica) {
    if (result.replica && result.replica != other.replica)
      return incompatible("replicas", result, other);
    result.replica = other.replica;
  }
  if (other.task) {
    if (result.task && result.task != other.task)
      return incompatible("tasks", result, other);
    result.task = other.task;
  }
  if (other.type) {
    if (result.type && result.type != other.type) {
      if (!allow_soft_placement)
        return incompatible("types", result, other);
      // Soft placement: any device of any type will do, and the id of
      // `other` no longer means anything, so stop here as TF does.
      result.type.reset();
      result.id.reset();
      target = std::move(result);
      return {};
    }
    result.type = other.type;
  }
  if (other.id) {
    if (result.id && result.id != other.id) {
      if (!allow_soft_placement)
        return incompatible("ids", result, other);
      result.id.reset();
      target = std::move(result);
      return {};
    }
    result.id = other.id;
  }
  target = std::move(result);
  return {};
}

std::string canonical_device(std::string_view text) {
  if (text.empty())
    return {};
  device_name spec;
  throw_if_error(device_name::parse_spec(text, spec));
  return spec.to_string();
}

} // namespace actorflow
