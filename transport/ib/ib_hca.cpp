#include "transport/ib/ib_hca.hpp"

#include "core/error.hpp"
#include "core/strings.hpp"

namespace ouro::transport::ib {

HcaFilter parseHcaList(const std::string& text) {
  HcaFilter f;
  size_t pos = 0;
  if (pos < text.size() && text[pos] == '^') f.exclude = true, pos++;
  if (pos < text.size() && text[pos] == '=') f.exact = true, pos++;
  while (pos < text.size()) {
    size_t end = text.find(',', pos);
    if (end == std::string::npos) end = text.size();
    std::string item = text.substr(pos, end - pos);
    pos = end + 1;
    if (item.empty()) continue;
    HcaFilter::Entry e;
    size_t colon = item.find(':');
    e.device = item.substr(0, colon);
    if (e.device.empty())
      raise(Result::kInvalidArgument, "OURO_IB_HCA=%s: entry '%s' names no device (expected DEVICE[:PORT], e.g. mlx5_0:1)",
            text.c_str(), item.c_str());
    if (colon != std::string::npos) {
      auto port = parseInt(item.substr(colon + 1));
      if (!port || *port < 1 || *port > 255)
        raise(Result::kInvalidArgument, "OURO_IB_HCA=%s: entry '%s' has a bad port (expected 1..255, e.g. mlx5_0:1)",
              text.c_str(), item.c_str());
      e.port = int(*port);
    }
    f.entries.push_back(std::move(e));
  }
  return f;
}

bool HcaFilter::allows(const std::string& device, int port) const {
  if (entries.empty()) return true;
  bool listed = false;
  for (const Entry& e : entries) {
    bool name = exact ? device == e.device : device.rfind(e.device, 0) == 0;
    if (name && (e.port < 0 || e.port == port)) listed = true;
  }
  return exclude ? !listed : listed;
}

}  // namespace ouro::transport::ib
