#include "trace_record.hpp"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

namespace ouro::tracetool {
namespace {

using json = nlohmann::json;

[[noreturn]] void bad(const std::string& source, const std::string& what) {
  throw TraceFormatError(source + ": " + what);
}

// A member that must be there with the right type (nlohmann's own messages do not say which).
const json& member(const json& object, const char* name, json::value_t type, const std::string& where,
                   const std::string& source) {
  auto it = object.find(name);
  if (it == object.end()) bad(source, where + " has no '" + name + "': not an ouro flight record, or a damaged one");
  const bool ok = it->type() == type || (type == json::value_t::number_integer && it->is_number_integer()) ||
                  (type == json::value_t::number_unsigned && it->is_number_unsigned());
  if (!ok) bad(source, where + "'s '" + name + "' is " + it->type_name() + ", not what ouro writes there");
  return *it;
}

std::string stringOr(const json& object, const char* name) {
  auto it = object.find(name);
  return it != object.end() && it->is_string() ? it->get<std::string>() : std::string();
}

int64_t integer(const json& object, const char* name, const std::string& where, const std::string& source) {
  auto it = object.find(name);
  if (it == object.end() || !it->is_number_integer())
    bad(source, where + " has no whole-number '" + name + "': not an ouro flight record, or a damaged one");
  return it->get<int64_t>();
}

CallRecord parseCall(const json& j, const std::string& where, const std::string& source) {
  if (!j.is_object()) bad(source, where + " is not an object");
  CallRecord c;
  c.seq = uint64_t(integer(j, "seq", where, source));
  c.call = uint64_t(integer(j, "call", where, source));
  c.collective = member(j, "collective", json::value_t::string, where, source).get<std::string>();
  c.count = uint64_t(integer(j, "count", where, source));
  c.dtype = stringOr(j, "dtype");
  c.redop = stringOr(j, "redop");
  if (j.contains("root") && j["root"].is_number_integer()) c.root = j["root"].get<int>();
  if (j.contains("peer") && j["peer"].is_number_integer()) c.peer = j["peer"].get<int>();
  c.direction = stringOr(j, "direction");
  c.algorithm = stringOr(j, "algorithm");
  c.protocol = stringOr(j, "protocol");
  c.stream = stringOr(j, "stream");
  if (j.contains("channels") && j["channels"].is_number_integer()) c.channels = j["channels"].get<int>();
  c.state = member(j, "state", json::value_t::string, where, source).get<std::string>();
  if (c.state != "queued" && c.state != "running" && c.state != "done" && c.state != "failed")
    bad(source, where + "'s state '" + c.state + "' is not queued, running, done or failed");
  c.enqueue_ns = integer(j, "enqueue_ns", where, source);
  c.start_ns = integer(j, "start_ns", where, source);
  c.end_ns = integer(j, "end_ns", where, source);
  c.error = stringOr(j, "error");
  return c;
}

}  // namespace

ProcessRecord parseRecord(const std::string& text, const std::string& source) {
  if (text.empty()) bad(source, "the file is empty (the rank may have been killed while writing it)");
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::parse_error& e) {
    const bool truncated = e.byte >= text.size();
    bad(source, truncated ? "the file ends in the middle of the record (truncated after " + std::to_string(text.size()) +
                                " bytes): it was cut short while written or copied"
                          : "not valid JSON at byte " + std::to_string(e.byte) + ": the file is corrupt, or not an "
                                "ouro flight record");
  }
  if (!doc.is_object()) bad(source, "not an ouro flight record (the document is not a JSON object)");
  if (stringOr(doc, "format") != "ouro-trace")
    bad(source, "not an ouro flight record (no \"format\": \"ouro-trace\"); ouro-trace reads the files ranks write "
                "into OURO_TRACE_DIR and ouroCommDumpTrace's output");
  const int64_t version = integer(doc, "version", "the record", source);
  if (version != 1)
    bad(source, "written in record format " + std::to_string(version) + ", this ouro-trace reads format 1");
  ProcessRecord p;
  p.source = source;
  p.job = stringOr(doc, "job");
  p.host = stringOr(doc, "host");
  p.reason = stringOr(doc, "reason");
  p.detail = stringOr(doc, "detail");
  p.pid = int(integer(doc, "pid", "the record", source));
  p.rank = int(integer(doc, "rank", "the record", source));
  p.steady_ns = integer(doc, "steady_ns", "the record", source);
  p.unix_ns = integer(doc, "unix_ns", "the record", source);
  p.status = stringOr(doc, "status");
  p.stack = stringOr(doc, "stack");
  const json& comms = member(doc, "communicators", json::value_t::array, "the record", source);
  for (size_t i = 0; i < comms.size(); i++) {
    const std::string where = "communicator " + std::to_string(i);
    const json& c = comms[i];
    if (!c.is_object()) bad(source, where + " is not an object");
    CommRecord comm;
    comm.id = member(c, "id", json::value_t::string, where, source).get<std::string>();
    comm.rank = int(integer(c, "rank", where, source));
    comm.size = int(integer(c, "size", where, source));
    if (comm.size < 1 || comm.rank < 0 || comm.rank >= comm.size)
      bad(source, where + " says rank " + std::to_string(comm.rank) + " of " + std::to_string(comm.size));
    comm.live = c.contains("live") && c["live"].is_boolean() ? c["live"].get<bool>() : true;
    comm.failure = stringOr(c, "failure");
    const json& calls = member(c, "calls", json::value_t::array, where, source);
    for (size_t k = 0; k < calls.size(); k++)
      comm.calls.push_back(parseCall(calls[k], where + ", call " + std::to_string(k), source));
    p.comms.push_back(std::move(comm));
  }
  return p;
}

ProcessRecord readRecordFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw TraceFormatError(path + ": cannot open: " + std::strerror(errno));
  std::ostringstream text;
  text << in.rdbuf();
  return parseRecord(text.str(), path);
}

}  // namespace ouro::tracetool
