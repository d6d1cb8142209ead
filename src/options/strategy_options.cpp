#include "lookahead/options/strategy_options.h"

#include <sstream>
#include <string>

namespace po = boost::program_options;

namespace la {
namespace {

// Binds the registry's strategy flags to Boost.Program_options; each flag's default is the value it points at.
class BoostStrategyFlags final : public StrategyFlags {
 public:
  explicit BoostStrategyFlags(po::options_description& d) : d_(d) {}
  void add(const std::string& f, int* v, const std::string& h) override { bind(f, v, h); }
  void add(const std::string& f, int64_t* v, const std::string& h) override { bind(f, v, h); }
  void add(const std::string& f, double* v, const std::string& h) override {
    std::ostringstream text;  // 0.1, not 0.10000000000000001
    text << *v;
    d_.add_options()(f.c_str(), po::value(v)->default_value(*v, text.str()), h.c_str());
  }
  void add(const std::string& f, std::string* v, const std::string& h) override { bind(f, v, h); }
  void add_switch(const std::string& f, bool* v, const std::string& h) override {
    d_.add_options()(f.c_str(), po::bool_switch(v), h.c_str());
  }

 private:
  template <class T>
  void bind(const std::string& f, T* v, const std::string& h) {
    d_.add_options()(f.c_str(), po::value(v)->default_value(*v), h.c_str());
  }
  po::options_description& d_;
};

}  // namespace

void add_strategy_options(po::options_description& d, StrategyOptions& s) {
  static const std::string names = strategy_names();
  d.add_options()
      ("strategy", po::value(&s.name)->default_value(s.name), names.c_str())
      ("draft-seed", po::value(&s.seed)->default_value(s.seed), "seed of draft-state randomness (LADE/Jacobi init)");
  BoostStrategyFlags flags(d);
  for (const auto& e : strategy_registry()) e.flags(flags, s);
}

}  // namespace la
