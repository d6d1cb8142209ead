// write_file_atomic (util/files.h): a regular file is replaced atomically; a path that is not a regular file (a
// device such as /dev/null or /dev/stdout, a FIFO) is written in place and stays what it was. Renaming over it
// turned this machine's /dev/null into a regular file once (a stats file written to /dev/null as root).
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>

#include "lookahead/util/files.h"
#include "common/expect_error.h"
#include "common/temp_dir.h"

namespace {

TEST(WriteFileAtomic, ReplacesARegularFile) {
  la::test::TempDir td;
  const std::string f = td.path("stats.json");
  la::test::write_bytes(f, "old contents, longer than the new");
  la::write_file_atomic(f, "new");
  EXPECT_EQ(la::test::read_bytes(f), "new");
}

TEST(WriteFileAtomic, AFifoIsWrittenInPlaceAndStaysAFifo) {
  la::test::TempDir td;
  const std::string f = td.path("pipe");
  ASSERT_EQ(::mkfifo(f.c_str(), 0600), 0);
  // A reader that does not block (the writer's open then succeeds at once; the data waits in the pipe's buffer).
  const int fd = ::open(f.c_str(), O_RDONLY | O_NONBLOCK);
  ASSERT_GE(fd, 0);
  la::write_file_atomic(f, "through the pipe");
  char buf[64] = {};
  const ssize_t n = ::read(fd, buf, sizeof buf);
  ::close(fd);
  EXPECT_EQ(std::string(buf, n > 0 ? size_t(n) : 0), "through the pipe");
  struct stat st {};
  ASSERT_EQ(::stat(f.c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode)) << "the FIFO was replaced by a regular file";
}

TEST(WriteFileAtomic, ADirectoryIsOneClearError) {
  la::test::TempDir td;
  const std::string e = la::test::error_of([&] { la::write_file_atomic(td.dir.string(), "x", "stats file"); });
  EXPECT_NE(e.find("is a directory"), std::string::npos) << e;
}

}  // namespace
