#include "actorflow/client/cluster_spec.hpp"

#include "actorflow/graph/device_name.hpp"
#include "actorflow/graph/text_util.hpp"

#include <algorithm>
#include <charconv>
#include <climits>
#include <cstdio>

#include <nlohmann/json.hpp>

namespace actorflow {

namespace {

[[noreturn]] void fail(std::string msg) {
  throw op_error(error_code::invalid_argument, std::move(msg));
}

// Python's repr() of a str: single quotes unless the text contains a single
// quote and no double quote; backslash escapes for the quote, backslash,
// \t \n \r and \xNN for other control characters. Bytes >= 0x80 pass
// through, as Python prints printable non-ASCII text unescaped.
std::string py_repr(std::string_view text) {
  bool has_single = text.find('\'') != std::string_view::npos;
  bool has_double = text.find('"') != std::string_view::npos;
  char quote = has_single && !has_double ? '"' : '\'';
  std::string out{quote};
  for (char c : text) {
    auto u = static_cast<unsigned char>(c);
    if (c == quote || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (u < 0x20 || u == 0x7f) {
      char buf[5];
      std::snprintf(buf, sizeof(buf), "\\x%02x", u);
      out += buf;
    } else {
      out += c;
    }
  }
  out += quote;
  return out;
}

void check_job_name(std::string_view job) {
  if (job.empty())
    fail("Job name must not be empty in a ClusterSpec");
}

void check_index(std::string_view job, long long index) {
  if (index < 0)
    fail("Task index " + std::to_string(index) + " in job " + py_repr(job)
         + " must not be negative");
}

std::string excerpt(std::string_view text) {
  constexpr size_t max_len = 200;
  if (text.size() <= max_len)
    return std::string{text};
  return std::string{text.substr(0, max_len)} + "...";
}

std::string tasks_repr(const job_tasks_form& tasks) {
  std::string out;
  if (auto list = std::get_if<std::vector<std::string>>(&tasks)) {
    out += '[';
    for (size_t i = 0; i < list->size(); ++i) {
      if (i > 0)
        out += ", ";
      out += py_repr((*list)[i]);
    }
    out += ']';
  } else {
    out += '{';
    bool first = true;
    for (const auto& [index, address] : std::get<1>(tasks)) {
      if (!first)
        out += ", ";
      first = false;
      out += std::to_string(index) + ": " + py_repr(address);
    }
    out += '}';
  }
  return out;
}

} // namespace

std::string to_string(const cluster_dict& dict) {
  std::string out{'{'};
  bool first = true;
  for (const auto& [job, tasks] : dict) {
    if (!first)
      out += ", ";
    first = false;
    out += py_repr(job) + ": " + tasks_repr(tasks);
  }
  out += '}';
  return out;
}

cluster_spec::cluster_spec(
  const std::map<std::string, std::vector<std::string>>& jobs) {
  for (const auto& [job, addresses] : jobs) {
    check_job_name(job);
    auto& tasks = jobs_[job];
    for (size_t i = 0; i < addresses.size(); ++i)
      tasks.emplace(static_cast<int>(i), addresses[i]);
  }
}

cluster_spec::cluster_spec(
  const std::map<std::string, std::map<int, std::string>>& jobs) {
  for (const auto& [job, tasks] : jobs) {
    check_job_name(job);
    for (const auto& entry : tasks)
      check_index(job, entry.first);
    jobs_[job] = tasks;
  }
}

cluster_spec::cluster_spec(const cluster_dict& dict) {
  for (const auto& [job, form] : dict) {
    check_job_name(job);
    auto& tasks = jobs_[job];
    if (auto list = std::get_if<std::vector<std::string>>(&form)) {
      for (size_t i = 0; i < list->size(); ++i)
        tasks.emplace(static_cast<int>(i), (*list)[i]);
    } else {
      for (const auto& entry : std::get<1>(form))
        check_index(job, entry.first);
      tasks = std::get<1>(form);
    }
  }
}

cluster_spec cluster_spec::from_json(std::string_view text) {
  using nlohmann::json;
  json doc;
  try {
    doc = json::parse(text.begin(), text.end());
  } catch (const json::exception& e) {
    fail("ClusterSpec JSON does not parse (" + std::string{e.what()}
         + "): '" + excerpt(text) + "'");
  }
  if (!doc.is_object())
    fail("`cluster` must be a dictionary mapping one or more job names to "
         "lists of network addresses, got '"
         + excerpt(text) + "'");
  cluster_spec result;
  for (const auto& [job, value] : doc.items()) {
    check_job_name(job);
    auto& tasks = result.jobs_[job];
    auto add = [&](long long index, const json& address) {
      if (!address.is_string())
        fail("Task address " + address.dump() + " must be bytes or unicode"
             + " (job " + py_repr(job) + ", task " + std::to_string(index)
             + ")");
      tasks.emplace(static_cast<int>(index), address.get<std::string>());
    };
    if (value.is_array()) {
      for (size_t i = 0; i < value.size(); ++i)
        add(static_cast<long long>(i), value[i]);
    } else if (value.is_object()) {
      for (const auto& [key, address] : value.items()) {
        bool out_of_range = false;
        auto index = parse_python_int(key, out_of_range);
        if (out_of_range)
          fail("Task index " + py_repr(key) + " in job " + py_repr(job)
               + " is out of range");
        if (!index)
          fail("invalid literal for int() with base 10: " + py_repr(key)
               + " (task key in job " + py_repr(job) + ")");
        check_index(job, *index);
        // "1" and "01" are one index; Python would keep whichever came
        // last, but JSON objects have no reliable order, so refuse.
        if (tasks.count(static_cast<int>(*index)) > 0)
          fail("Duplicate task index " + std::to_string(*index) + " in job "
               + py_repr(job) + " (key " + py_repr(key) + ")");
        add(*index, address);
      }
    } else {
      fail("The tasks for job " + py_repr(job)
           + " must be a list or a dictionary from integers to strings, got "
           + value.dump());
    }
  }
  return result;
}

std::string cluster_spec::to_json() const {
  nlohmann::json doc = nlohmann::json::object();
  for (const auto& [job, form] : as_dict()) {
    if (auto list = std::get_if<std::vector<std::string>>(&form)) {
      doc[job] = *list;
    } else {
      auto obj = nlohmann::json::object();
      for (const auto& [index, address] : std::get<1>(form))
        obj[std::to_string(index)] = address;
      doc[job] = std::move(obj);
    }
  }
  return doc.dump();
}

const std::map<int, std::string>&
cluster_spec::tasks_of(std::string_view job) const {
  auto i = jobs_.find(job);
  if (i == jobs_.end())
    fail("No such job in cluster: " + py_repr(job));
  return i->second;
}

std::vector<std::string> cluster_spec::jobs() const {
  std::vector<std::string> result;
  result.reserve(jobs_.size());
  for (const auto& entry : jobs_)
    result.push_back(entry.first);
  return result;
}

std::vector<std::optional<std::string>>
cluster_spec::job_tasks(std::string_view job) const {
  const auto& tasks = tasks_of(job);
  std::vector<std::optional<std::string>> result;
  if (tasks.empty())
    return result;
  result.resize(static_cast<size_t>(tasks.rbegin()->first) + 1);
  for (const auto& [index, address] : tasks)
    result[static_cast<size_t>(index)] = address;
  return result;
}

int cluster_spec::num_tasks(std::string_view job) const {
  return static_cast<int>(tasks_of(job).size());
}

std::vector<int> cluster_spec::task_indices(std::string_view job) const {
  std::vector<int> result;
  for (const auto& entry : tasks_of(job))
    result.push_back(entry.first);
  return result;
}

const std::string& cluster_spec::task_address(std::string_view job,
                                              int index) const {
  const auto& tasks = tasks_of(job);
  auto i = tasks.find(index);
  if (i == tasks.end())
    fail("No task with index " + std::to_string(index) + " in job "
         + py_repr(job));
  return i->second;
}

bool cluster_spec::has_task(std::string_view job, int index) const noexcept {
  auto i = jobs_.find(job);
  return i != jobs_.end() && i->second.count(index) > 0;
}

bool cluster_spec::has_job(std::string_view job) const noexcept {
  return jobs_.find(job) != jobs_.end();
}

cluster_dict cluster_spec::as_dict() const {
  cluster_dict result;
  for (const auto& [job, tasks] : jobs_) {
    // Indices are unique and non-negative, so max + 1 == count means 0..n-1.
    bool dense = !tasks.empty()
                 && static_cast<size_t>(tasks.rbegin()->first) + 1
                      == tasks.size();
    if (dense) {
      std::vector<std::string> list;
      list.reserve(tasks.size());
      for (const auto& entry : tasks)
        list.push_back(entry.second);
      result.emplace(job, std::move(list));
    } else {
      result.emplace(job, tasks);
    }
  }
  return result;
}

std::string cluster_spec::as_cluster_def() const {
  // JobDef { string name = 1; map<int32, string> tasks = 2; }. Python's
  // text_format prints each map entry as a message and omits the proto3
  // defaults in it: key 0 and an empty value.
  std::string out;
  for (const auto& [job, tasks] : jobs_) {
    out += "job {\n";
    out += "  name: \"" + c_escape(job) + "\"\n";
    for (const auto& [index, address] : tasks) {
      out += "  tasks {\n";
      if (index != 0)
        out += "    key: " + std::to_string(index) + "\n";
      if (!address.empty())
        out += "    value: \"" + c_escape(address) + "\"\n";
      out += "  }\n";
    }
    out += "}\n";
  }
  return out;
}

std::string cluster_spec::to_string() const {
  return "ClusterSpec(" + actorflow::to_string(as_dict()) + ")";
}

std::vector<std::string> cluster_spec::task_names() const {
  // TF orders devices by their full name as a string; every task's CPU:0
  // shares the suffix, so sorting on it keeps TF's (lexicographic) order.
  constexpr std::string_view suffix = "/device:CPU:0";
  std::vector<std::string> full;
  for (const auto& [job, tasks] : jobs_)
    for (const auto& entry : tasks)
      full.push_back(task_name(job, entry.first) + std::string{suffix});
  std::sort(full.begin(), full.end());
  for (auto& name : full)
    name.resize(name.size() - suffix.size());
  return full;
}

std::ostream& operator<<(std::ostream& out, const cluster_spec& spec) {
  return out << spec.to_string();
}

} // namespace actorflow
