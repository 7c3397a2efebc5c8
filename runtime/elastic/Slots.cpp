//===- Slots.cpp - The devices an elastic job can use -------------*- C++
//-*-===//

#include "runtime/elastic/Slots.h"

#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace loom::runtime {

StatusOr<std::vector<Host>> parseHostfile(const std::string &text,
                                          const std::string &path) {
  std::vector<Host> hosts;
  std::istringstream in(text);
  std::string line;
  for (int lineNo = 1; std::getline(in, line); ++lineNo) {
    if (size_t hash = line.find('#'); hash != std::string::npos)
      line.resize(hash);
    std::istringstream words(line);
    Host host;
    if (!(words >> host.name))
      continue;
    for (std::string word; words >> word;) {
      if (word.rfind("slots=", 0) != 0)
        continue;
      std::string count = word.substr(6);
      char *end = nullptr;
      errno = 0;
      long long n = std::strtoll(count.c_str(), &end, 10);
      if (count.empty() || *end != '\0' || errno == ERANGE || n < 1 ||
          n > 1000000)
        return makeError("%s:%d: slots=%s is not a count from 1 to 1000000",
                         path.c_str(), lineNo, count.c_str());
      host.slots = n;
    }
    bool merged = false;
    for (Host &h : hosts)
      if (h.name == host.name) {
        h.slots += host.slots;
        merged = true;
      }
    if (!merged)
      hosts.push_back(host);
  }
  if (hosts.empty())
    return makeError("%s: no hosts in the hostfile", path.c_str());
  return hosts;
}

StatusOr<std::vector<Host>> readHostfile(const std::string &path) {
  std::ifstream in(path);
  if (!in)
    return makeError("cannot read the hostfile '%s'", path.c_str());
  std::ostringstream text;
  text << in.rdbuf();
  return parseHostfile(text.str(), path);
}

std::vector<Host> usableHosts(const std::vector<Host> &hosts,
                              const std::map<std::string, int64_t> &lost) {
  std::vector<Host> left;
  for (Host h : hosts) {
    if (auto it = lost.find(h.name); it != lost.end())
      h.slots -= it->second;
    if (h.slots > 0)
      left.push_back(h);
  }
  return left;
}

int64_t totalSlots(const std::vector<Host> &hosts) {
  int64_t n = 0;
  for (const Host &h : hosts)
    n += h.slots;
  return n;
}

std::string hostfileFor(const std::vector<Host> &hosts, int64_t n) {
  std::string text;
  for (const Host &h : hosts) {
    if (n <= 0)
      break;
    int64_t take = std::min(n, h.slots);
    text += h.name + " slots=" + std::to_string(take) + "\n";
    n -= take;
  }
  return text;
}

int64_t usableDevices(const std::string &cluster, int64_t perNode, int64_t n) {
  if (cluster == "cpu" || perNode <= 0 || n < perNode)
    return n;
  return n / perNode * perNode;
}

std::string clusterSpec(const std::string &cluster, int64_t perNode,
                        int64_t n) {
  if (cluster == "cpu")
    return "cpu:" + std::to_string(n);
  if (perNode <= 0 || n < perNode)
    return cluster + ":1x" + std::to_string(n);
  return cluster + ":" + std::to_string(n / perNode) + "x" +
         std::to_string(perNode);
}

} // namespace loom::runtime
