// The one exception type of lowbit's C++ API: every bad argument becomes a lowbit::Error whose
// message names the argument and the rule it broke.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace lowbit {

class Error : public std::invalid_argument {
 public:
  explicit Error(const std::string& what) : std::invalid_argument(what) {}
};

namespace detail {
template <class... Parts>
[[noreturn]] void fail(const Parts&... parts) {
  std::ostringstream os;
  (os << ... << parts);
  throw Error(os.str());
}
}  // namespace detail

}  // namespace lowbit

// Checks an argument rule; on failure throws lowbit::Error built from the message parts.
#define LOWBIT_CHECK(cond, ...)                       \
  do {                                                \
    if (!(cond)) ::lowbit::detail::fail(__VA_ARGS__); \
  } while (0)
