// error_of / expect_error: a test's view of the one la::Error a bad input must produce (tests/common/).
#pragma once
#include <gtest/gtest.h>

#include <string>

#include "lookahead/util/error.h"

namespace la::test {

// The message of the la::Error `f` throws, or "<no error>" when it returns normally.
template <class F>
std::string error_of(F f) {
  try {
    f();
  } catch (const la::Error& e) {
    return e.what();
  }
  return "<no error>";
}

// Expects `f` to throw la::Error whose message names `path` and contains `part`.
template <class F>
void expect_error(F f, const std::string& path, const std::string& part) {
  try {
    f();
    ADD_FAILURE() << "no la::Error thrown (expected '" << part << "')";
  } catch (const la::Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(path), std::string::npos) << msg;
    EXPECT_NE(msg.find(part), std::string::npos) << msg;
  }
}

}  // namespace la::test
