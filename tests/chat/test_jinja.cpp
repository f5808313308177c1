// The interpreter against jinja2: every case of jinja_cases.json rendered by
// Python's jinja2 3.1 (tests/chat/make_reference.py wrote the expected text,
// or the error jinja2 raised, into reference/jinja_cases.json).
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "base/error.h"
#include "chat/jinja.h"

namespace colibri::jinja {
namespace {

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::string render(const std::string& tmpl,
                   const nlohmann::ordered_json& vars = nlohmann::ordered_json::object(),
                   Options opt = {.trim_blocks = true, .lstrip_blocks = true}) {
  return Template(tmpl, opt).render(from_json(vars));
}

TEST(Jinja, MatchesJinja2OnUnitCases) {
  std::string path = std::string(COLIBRI_SOURCE_DIR) + "/tests/chat/reference/jinja_cases.json";
  auto cases = nlohmann::ordered_json::parse(read_file(path));
  ASSERT_GT(cases.size(), 50u);
  for (const auto& c : cases) {
    SCOPED_TRACE("case " + c["name"].get<std::string>() + ": " + c["template"].get<std::string>());
    Options opt{.trim_blocks = c["trim_blocks"].get<bool>(),
                .lstrip_blocks = c["lstrip_blocks"].get<bool>()};
    if (c.contains("error")) {
      EXPECT_THROW(render(c["template"], c["vars"], opt), Error) << "jinja2: " << c["error"];
      continue;
    }
    std::string got;
    try {
      got = render(c["template"], c["vars"], opt);
    } catch (const Error& e) {
      ADD_FAILURE() << "threw: " << e.what();
      continue;
    }
    std::string want = c["expected"];
    EXPECT_TRUE(got == want) << "\n  want: " << want << "\n  got:  " << got;
  }
}

// Errors name the template position.
TEST(Jinja, SyntaxErrorNamesLineAndColumn) {
  try {
    Template("line one\n{% if x %}\n  {{ a + }}\n{% endif %}");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("line 3 column"), std::string::npos) << e.what();
  }
}

TEST(Jinja, UnclosedBlockIsAnError) {
  EXPECT_THROW(Template("{% for x in y %}no end"), Error);
  EXPECT_THROW(Template("{{ 'unterminated }}"), Error);
  EXPECT_THROW(Template("{# never closed"), Error);
  EXPECT_THROW(Template("{% endif %}"), Error);
  EXPECT_THROW(Template("{% include 'other.jinja' %}"), Error);
}

TEST(Jinja, UnknownFilterNamesItAndWhere) {
  try {
    render("ok\n  {{ x | no_such_filter }}", {{"x", 1}});
    FAIL() << "no error";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("no_such_filter"), std::string::npos) << msg;
    EXPECT_NE(msg.find("line 2"), std::string::npos) << msg;
  }
  EXPECT_THROW(render("{{ 1 is no_such_test }}"), Error);
}

TEST(Jinja, RuntimeErrorNamesLine) {
  try {
    render("a\nb\n{{ 'x' + 1 }}");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("line 3 column"), std::string::npos) << e.what();
  }
}

// Untrusted templates end in an error, not a crash.
TEST(Jinja, RunawayRecursionIsAnError) {
  EXPECT_THROW(render("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}"), Error);
  EXPECT_THROW(render("{{ range(100000000) | length }}"), Error);
  EXPECT_THROW(Template("{{ " + std::string(100000, '(') + "1" + std::string(100000, ')') + " }}"),
               Error);
  EXPECT_THROW(Template("{{ " + std::string(100000, '-') + "1 }}"), Error);
  std::string nested_ifs;
  for (int i = 0; i < 100000; i++) nested_ifs += "{% if true %}";
  EXPECT_THROW(Template(nested_ifs + "x"), Error);
}

// Python's dicts keep insertion order, and so must ours: tojson of a tool
// schema prints keys in the order the client sent them.
TEST(Jinja, DictsKeepInsertionOrder) {
  auto vars = nlohmann::ordered_json::parse(R"({"d": {"zeta": 1, "alpha": 2, "mid": 3}})");
  EXPECT_EQ(render("{{ d | tojson }}", vars), R"({"zeta": 1, "alpha": 2, "mid": 3})");
  EXPECT_EQ(render("{% for k in d %}{{ k }} {% endfor %}", vars), "zeta alpha mid ");
}

TEST(Jinja, FloatReprMatchesPython) {
  // Values and their repr() as printed by CPython 3.
  const std::pair<double, const char*> cases[] = {{0.1, "0.1"},
                                                  {1.0, "1.0"},
                                                  {1e16, "1e+16"},
                                                  {1e15, "1000000000000000.0"},
                                                  {1e-5, "1e-05"},
                                                  {0.0001, "0.0001"},
                                                  {-2.5, "-2.5"},
                                                  {123.456, "123.456"},
                                                  {1.5e300, "1.5e+300"},
                                                  {5e-324, "5e-324"},
                                                  {2.0 / 3, "0.6666666666666666"}};
  for (auto [v, want] : cases) EXPECT_EQ(format_float(v), want);
}

TEST(Jinja, HeaderExampleRenders) {
  Template t("{% for m in messages %}{{ m.role }}{% endfor %}",
             {.trim_blocks = true, .lstrip_blocks = true});
  auto vars =
      nlohmann::ordered_json::parse(R"({"messages": [{"role": "user"}, {"role": "assistant"}]})");
  EXPECT_EQ(t.render(from_json(vars)), "userassistant");
}

}  // namespace
}  // namespace colibri::jinja
