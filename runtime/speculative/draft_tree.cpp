#include "speculative/draft_tree.h"

#include <algorithm>
#include <string>

#include "common/error.h"

namespace vegas {

int64_t max_tree_nodes(const DraftTreeShape &shape, int32_t gamma) {
  int64_t nodes = 1, level = 1;
  for (int32_t j = 0; j < gamma; ++j) {
    level *= std::max(1, shape.children_at(j));
    nodes += level;
    if (nodes > (int64_t{1} << 40)) break;  // far past any bound; no overflow
  }
  return nodes;
}

DraftTree::DraftTree(int32_t root_token)
    : tokens_{root_token},
      parents_{-1},
      depths_{0},
      first_child_{0},
      n_children_{0},
      level_begin_{0} {}

void DraftTree::begin_level() {
  level_begin_.push_back(n_nodes());
}

int32_t DraftTree::add_child(int32_t parent, int32_t token) {
  const int32_t level = n_levels() - 1;
  const int32_t node = n_nodes();
  if (level < 1 || parent < level_begin(level - 1) || parent >= level_begin(level) ||
      (node > level_begin(level) && parent < parents_.back()))
    fail(VEGAS_ERR_INTERNAL, "draft tree: node " + std::to_string(node) + "'s parent " +
                                 std::to_string(parent) + " is not in order in the level above");
  tokens_.push_back(token);
  parents_.push_back(parent);
  depths_.push_back(level);
  first_child_.push_back(0);
  n_children_.push_back(0);
  if (n_children_[static_cast<size_t>(parent)]++ == 0)
    first_child_[static_cast<size_t>(parent)] = node;
  return node;
}

std::vector<int32_t> DraftTree::path_to(int32_t node) const {
  std::vector<int32_t> path;
  for (int32_t n = node; n > 0; n = parent(n)) path.push_back(n);
  std::reverse(path.begin(), path.end());
  return path;
}

std::vector<int32_t> DraftTree::main_path() const {
  std::vector<int32_t> path{0};
  while (n_children(path.back()) > 0) path.push_back(first_child(path.back()));
  return path;
}

int32_t DraftTree::accepted_on_main_path(const std::vector<int32_t> &path) const {
  const std::vector<int32_t> main = main_path();
  int32_t k = 0;
  while (k < static_cast<int32_t>(path.size()) && k + 1 < static_cast<int32_t>(main.size()) &&
         path[static_cast<size_t>(k)] == main[static_cast<size_t>(k) + 1])
    ++k;
  return k;
}

}  // namespace vegas
