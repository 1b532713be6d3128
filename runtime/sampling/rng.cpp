// Counter-based random numbers for sampling (see Rng in sampling.h).
#include "sampling/sampling.h"

namespace vegas {

namespace {

// SplitMix64's finaliser (Stafford's Mix13): a bijective 64-bit avalanche.
uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

constexpr uint64_t kGolden = 0x9e3779b97f4a7c15ULL;

}  // namespace

// Draw i is SplitMix64's i-th output for a key derived from the seed. Hashing
// the seed first keeps nearby seeds (0, 1, 2, ...) from giving shifted copies of
// one stream, which plain SplitMix64 streams would be.
uint64_t Rng::hash(uint64_t seed, uint64_t counter) {
  const uint64_t key = mix64(seed ^ 0x5851f42d4c957f2dULL);
  return mix64(key + (counter + 1) * kGolden);
}

uint64_t Rng::next_u64() {
  return hash(seed_, counter_++);
}

double Rng::uniform() {
  // The top 53 bits scaled by 2^-53: every double k / 2^53 for k in [0, 2^53).
  return static_cast<double>(next_u64() >> 11) * 0x1.0p-53;
}

}  // namespace vegas
