// A sorted-vector map (header-only template), in the spirit of
// base::flat_map.

#ifndef BASE_CONTAINERS_FLAT_MAP_H_
#define BASE_CONTAINERS_FLAT_MAP_H_

#include <algorithm>
#include <cstddef>
#include <utility>
#include <vector>

namespace base {

template <typename Key, typename Value>
class FlatMap {
 public:
  using Entry = std::pair<Key, Value>;

  // Inserts or overwrites; returns true if the key was new.
  bool Set(const Key& key, Value value) {
    auto it = LowerBound(key);
    if (it != entries_.end() && it->first == key) {
      it->second = std::move(value);
      return false;
    }
    entries_.insert(it, Entry(key, std::move(value)));
    return true;
  }

  const Value* Find(const Key& key) const {
    auto it = std::lower_bound(
        entries_.begin(), entries_.end(), key,
        [](const Entry& entry, const Key& k) { return entry.first < k; });
    if (it == entries_.end() || !(it->first == key))
      return nullptr;
    return &it->second;
  }

  bool Erase(const Key& key) {
    auto it = LowerBound(key);
    if (it == entries_.end() || !(it->first == key))
      return false;
    entries_.erase(it);
    return true;
  }

  size_t size() const { return entries_.size(); }
  const std::vector<Entry>& entries() const { return entries_; }

 private:
  typename std::vector<Entry>::iterator LowerBound(const Key& key) {
    return std::lower_bound(
        entries_.begin(), entries_.end(), key,
        [](const Entry& entry, const Key& k) { return entry.first < k; });
  }

  std::vector<Entry> entries_;
};

}  // namespace base

#endif  // BASE_CONTAINERS_FLAT_MAP_H_
