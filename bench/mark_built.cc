// mark_built: make a ninja build directory look freshly built without running any command, so that a
// benchmark can time ninja's no-op on graphs far too large to build (1,000 targets x 1,000 objects).
//
// Linked against libninja from the same ninja version that is timed: it loads build.ninja with ninja's own
// parser, creates every output that is missing (empty), gives all outputs one mtime (now), writes a
// minimal valid file for every depfile and dyndep file, and records each edge in .ninja_log (ninja's own
// command hash) and, for `deps =` edges, an empty entry in .ninja_deps. `ninja -n` then has no work to do.
#include <stdio.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <map>
#include <string>
#include <vector>

#include "build_log.h"
#include "deps_log.h"
#include "disk_interface.h"
#include "graph.h"
#include "manifest_parser.h"
#include "state.h"

namespace {

struct NoDeadPaths : public BuildLogUser {
  bool IsPathDead(StringPiece) const override { return false; }
};

std::string Escape(const std::string& path) {
  std::string out;
  for (char c : path) {
    if (c == ' ' || c == ':' || c == '$') out += '$';
    out += c;
  }
  return out;
}

bool Touch(RealDiskInterface* disk, const std::string& path, const struct timespec& when) {
  std::string::size_type slash = path.rfind('/');
  if (slash != std::string::npos && !disk->MakeDirs(path)) return false;
  int fd = open(path.c_str(), O_WRONLY | O_CREAT, 0644);
  if (fd < 0) return false;
  close(fd);
  struct timespec times[2] = {when, when};
  return utimensat(AT_FDCWD, path.c_str(), times, 0) == 0;
}

}  // namespace

int main(int argc, char** argv) {
  const char* manifest = argc > 1 ? argv[1] : "build.ninja";
  State state;
  RealDiskInterface disk;
  ManifestParser parser(&state, &disk);
  std::string err;
  if (!parser.Load(manifest, &err)) {
    fprintf(stderr, "mark_built: %s\n", err.c_str());
    return 1;
  }
  std::string builddir = state.bindings_.LookupVariable("builddir");
  std::string prefix = builddir.empty() ? "" : builddir + "/";
  if (!builddir.empty()) disk.MakeDirs(prefix + ".ninja_log");
  NoDeadPaths user;
  BuildLog log;
  DepsLog deps;
  if (!log.OpenForWrite(prefix + ".ninja_log", user, &err) || !deps.OpenForWrite(prefix + ".ninja_deps", &err)) {
    fprintf(stderr, "mark_built: %s\n", err.c_str());
    return 1;
  }
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  TimeStamp mtime = static_cast<TimeStamp>(now.tv_sec) * 1000000000LL + now.tv_nsec;
  std::map<Node*, std::vector<Edge*>> dyndeps;
  long edges = 0, files = 0;
  for (Edge* edge : state.edges_) {
    if (edge->is_phony() || edge->GetBindingBool("generator")) continue;
    for (Node* out : edge->outputs_) {
      if (!Touch(&disk, out->path(), now)) {
        fprintf(stderr, "mark_built: cannot create %s\n", out->path().c_str());
        return 1;
      }
      ++files;
    }
    std::string depfile = edge->GetUnescapedDepfile();
    if (!edge->GetBinding("deps").empty()) {
      deps.RecordDeps(edge->outputs_[0], mtime, std::vector<Node*>());
    } else if (!depfile.empty()) {
      disk.WriteFile(depfile, Escape(edge->outputs_[0]->path()) + ":\n");
    }
    if (edge->dyndep_) dyndeps[edge->dyndep_].push_back(edge);
    log.RecordCommand(edge, 0, 0, mtime);
    ++edges;
  }
  for (auto& entry : dyndeps) {
    std::string text = "ninja_dyndep_version = 1\n";
    for (Edge* edge : entry.second) text += "build " + Escape(edge->outputs_[0]->path()) + ": dyndep\n";
    if (!disk.WriteFile(entry.first->path(), text)) return 1;
    struct timespec times[2] = {now, now};
    utimensat(AT_FDCWD, entry.first->path().c_str(), times, 0);
  }
  log.Close();
  deps.Close();
  printf("mark_built: %ld edges, %ld outputs, %zu dyndep files\n", edges, files, dyndeps.size());
  return 0;
}
