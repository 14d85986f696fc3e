// Unit tests of the memory backend's row storage (row_arena.h,
// huge_pages.h).
#include <array>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#ifdef __linux__
#include <sys/mman.h>
#endif

#include "gtest/gtest.h"
#include "huge_pages.h"
#include "row_arena.h"

namespace sluice::memory {
namespace {

// A row of about 1 KiB that counts its live copies, so a test can see every
// row destroyed exactly once.
struct CountedRow {
  explicit CountedRow(int v, int* live) : value(v), live(live) { ++*live; }
  CountedRow(CountedRow&& other) noexcept
      : value(other.value), live(other.live) {
    ++*live;
  }
  ~CountedRow() { --*live; }

  int value;
  int* live;
  std::array<char, 1000> padding{};
};

TEST(RowArena, RowsKeepTheirAddressesAndValuesAcrossChunksOfEverySize) {
  int live = 0;
  {
    RowArena<CountedRow> arena;
    std::vector<CountedRow*> rows;
    // 1 KiB rows: chunks of 256, 512, 1,024 rows, then 2 MiB ones.
    for (int i = 0; i < 10'000; ++i) {
      rows.push_back(&arena.AddMade([&] { return CountedRow(i, &live); }));
    }
    EXPECT_EQ(arena.size(), 10'000u);
    EXPECT_EQ(live, 10'000);
    for (int i = 0; i < 10'000; ++i) ASSERT_EQ(rows[i]->value, i);
#ifdef __linux__
    // The fourth chunk, after 256 + 512 + 1,024 rows, is a huge page's worth.
    EXPECT_EQ(reinterpret_cast<uintptr_t>(rows[1'792]) % kHugePageBytes, 0u);
    EXPECT_NE(reinterpret_cast<uintptr_t>(rows[256]) % kHugePageBytes, 0u);
#endif
  }
  EXPECT_EQ(live, 0);
}

TEST(RowArena, AnErasedSlotIsTakenByTheNextRowAndOnlyLiveRowsAreDestroyed) {
  int live = 0;
  {
    RowArena<CountedRow> arena;
    std::vector<CountedRow*> rows;
    for (int i = 0; i < 3'000; ++i) {
      rows.push_back(&arena.AddMade([&] { return CountedRow(i, &live); }));
    }
    arena.Erase(*rows[2'999]);
    arena.Erase(*rows[7]);
    EXPECT_EQ(live, 2'998);
    // Most recently erased first.
    EXPECT_EQ(&arena.AddMade([&] { return CountedRow(-1, &live); }), rows[7]);
    EXPECT_EQ(&arena.AddMade([&] { return CountedRow(-2, &live); }),
              rows[2'999]);
    EXPECT_EQ(rows[7]->value, -1);
    EXPECT_EQ(arena.size(), 3'000u);
    arena.Erase(*rows[0]);
  }
  EXPECT_EQ(live, 0);
}

TEST(HugePages, ALargeChunkIsWritableAndOnAHugePageBoundary) {
  const size_t bytes = kHugePageBytes - 100;  // a huge page's worth of rows
  auto* chunk = static_cast<unsigned char*>(AllocateChunk(bytes));
  std::memset(chunk, 0xAB, bytes);
  EXPECT_EQ(chunk[bytes - 1], 0xAB);
#ifdef __linux__
  EXPECT_EQ(reinterpret_cast<uintptr_t>(chunk) % kHugePageBytes, 0u);
#endif
  FreeChunk(chunk, bytes);
}

TEST(HugePages, ASmallChunkIsWritable) {
  auto* chunk = static_cast<unsigned char*>(AllocateChunk(4096));
  std::memset(chunk, 0xCD, 4096);
  EXPECT_EQ(chunk[4095], 0xCD);
  FreeChunk(chunk, 4096);
}

#ifdef __linux__
// How many of the 4 KiB pages of [chunk, chunk + bytes) are resident.
size_t ResidentPages(void* chunk, size_t bytes) {
  std::vector<unsigned char> pages(bytes / 4096);
  if (mincore(chunk, bytes, pages.data()) != 0) return 0;
  size_t resident = 0;
  for (unsigned char page : pages) resident += page & 1;
  return resident;
}

TEST(HugePages, AChunkPreparedAheadComesFaultedIn) {
  const size_t bytes = kHugePageBytes - 100;
  // Taking a huge-page chunk asks for its replacement.
  void* taken = AllocateChunk(bytes);
  PrepareChunks();
  void* next = AllocateChunk(bytes);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(next) % kHugePageBytes, 0u);
  EXPECT_EQ(ResidentPages(next, kHugePageBytes), kHugePageBytes / 4096);
  std::memset(next, 0xEF, bytes);
  EXPECT_EQ(static_cast<unsigned char*>(next)[bytes - 1], 0xEF);
  FreeChunk(next, bytes);
  FreeChunk(taken, bytes);
}
#endif

TEST(HugePages, ThreadsPrepareAndTakeChunksAtOnce) {
  constexpr size_t bytes = kHugePageBytes - 100;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([t] {
      for (int i = 0; i < 8; ++i) {
        PrepareChunks();
        auto* chunk = static_cast<unsigned char*>(AllocateChunk(bytes));
        std::memset(chunk, t, bytes);
        EXPECT_EQ(chunk[bytes - 1], t);
        FreeChunk(chunk, bytes);
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
}

}  // namespace
}  // namespace sluice::memory
