// A round's tree of drafts for one sequence (LongSpec's token trees, DESIGN
// §3): node 0 is the sequence's newest token, every other node a draft drawn
// from its parent's draft distribution. The top `branches` tokens (greedy) or
// that many draws without replacement (sampling) branch at each of the first
// `branch_depth` levels; below them each branch goes on as a chain. Nodes are
// in level order with each node's children contiguous, so a draft pass's rows
// (one level) and a verify pass's rows (every node) are consecutive KV slots
// (backend.h: TokenTree).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace vegas {

struct DraftTreeShape {
  int32_t branches = 1;      // children of a node above branch_depth; 1 = a chain
  int32_t branch_depth = 0;  // levels that branch
  bool chain() const { return branches <= 1 || branch_depth <= 0; }
  // Children of each node at `depth` (0 = the root).
  int32_t children_at(int32_t depth) const { return depth < branch_depth ? branches : 1; }
};

// Bounds of the ABI (vegas_session_options.tree_branches / tree_depth).
constexpr int32_t kMaxTreeBranches = 8;
constexpr int32_t kMaxTreeNodes = 256;

// The most nodes a tree of `gamma` draft levels has, its root included.
int64_t max_tree_nodes(const DraftTreeShape &shape, int32_t gamma);

class DraftTree {
 public:
  explicit DraftTree(int32_t root_token = 0);

  int32_t n_nodes() const { return static_cast<int32_t>(tokens_.size()); }
  int32_t n_levels() const { return static_cast<int32_t>(level_begin_.size()); }
  int32_t token(int32_t node) const { return tokens_[static_cast<size_t>(node)]; }
  int32_t parent(int32_t node) const { return parents_[static_cast<size_t>(node)]; }
  int32_t depth(int32_t node) const { return depths_[static_cast<size_t>(node)]; }
  const int32_t *parents() const { return parents_.data(); }
  const int32_t *tokens() const { return tokens_.data(); }
  // Nodes of level j: [level_begin(j), level_end(j)).
  int32_t level_begin(int32_t level) const { return level_begin_[static_cast<size_t>(level)]; }
  int32_t level_end(int32_t level) const {
    return level + 1 < n_levels() ? level_begin_[static_cast<size_t>(level) + 1] : n_nodes();
  }
  // The children of a node: [first_child, first_child + n_children).
  int32_t first_child(int32_t node) const { return first_child_[static_cast<size_t>(node)]; }
  int32_t n_children(int32_t node) const { return n_children_[static_cast<size_t>(node)]; }

  // Starts the next level; its children are then added parent by parent, in
  // the order of the previous level (INTERNAL otherwise).
  void begin_level();
  int32_t add_child(int32_t parent, int32_t token);

  // The nodes from the root's first child down to `node` (the drafts that a
  // path of acceptances keeps), in order.
  std::vector<int32_t> path_to(int32_t node) const;
  // The root and, level by level, the first child: the branch of the most
  // likely drafts, which stands for the chain where one row per depth is needed.
  std::vector<int32_t> main_path() const;
  // How many nodes of an accepted `path` (path_to's form) lie on the main
  // path: the index, among the main path's rows, of the last row whose
  // context the accepted drafts agree with (where selection reads scores).
  int32_t accepted_on_main_path(const std::vector<int32_t> &path) const;

 private:
  std::vector<int32_t> tokens_, parents_, depths_, first_child_, n_children_, level_begin_;
};

}  // namespace vegas
