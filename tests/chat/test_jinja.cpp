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

// A template comes with the model file: what would run for minutes or build
// gigabytes ends in an error that names the template position, quickly.
TEST(Jinja, UntrustedTemplatesEndInErrorsNotHangsOrGigabytes) {
  struct Case {
    const char* tmpl;
    const char* message;  // a part of the error
  };
  const Case cases[] = {
      {R"({{ "ab" * 1000000000 }})", "repeating a str of 2 bytes 1000000000 times"},
      {R"({{ [1, 2] * 1000000000 }})", "repeating a list of 2 items"},
      {R"({{ 3 * "a" * 100000000 }})", "repeating a str of 3 bytes 100000000 times"},
      {R"({% set ns = namespace(s="a") %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %})",
       "~ would build a string of 33554432 bytes"},
      {R"({% set ns = namespace(s="a") %}{% for i in range(40) %}{% set ns.s = ns.s + ns.s %}{% endfor %})",
       "+ would build a string"},
      {R"({% set ns = namespace(l=[1]) %}{% for i in range(40) %}{% set ns.l = ns.l + ns.l %}{% endfor %})",
       "+ would build a list of 1048576 items"},
      {R"({{ range(1000000)|join("x" * 1000) }})", "join would build a string"},
      {R"({{ range(1000000)|map("string")|list|join("x" * 1000) }})", "join would build a string"},
      {R"({{ ("x" * 1000).join(range(1000000)|map("string")) }})", "join would build a string"},
      {R"({{ ("a" * 1000000)|replace("a", "b" * 100) }})", "replace would build a string"},
      {R"({{ ("a" * 1000000).replace("", "b" * 100) }})", "replace would build a string"},
      {R"({{ "a"|indent(1000000000000) }})", "indent would build a string"},
      {R"({{ "a"|center(1000000000000) }})", "center would build a string"},
      {R"({{ range(-9000000000000000000, 9000000000000000000)|length }})", "range() of"},
      {R"({{ 2 ** 64 }})", "integer overflow"},
      {R"({% for i in range(100) %}{{ "x" * 1000000 }}{% endfor %})", "the output would grow"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.tmpl);
    try {
      render(c.tmpl);
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find(c.message), std::string::npos) << what;
      EXPECT_NE(what.find("chat template line 1 column"), std::string::npos) << what;
    }
  }
}

// The step budget: nested loops, and loops in macros, stop at it; a render
// within it gives the text, and the default leaves room for long chats.
TEST(Jinja, RenderStopsAtItsStepBudget) {
  Options small{.trim_blocks = true, .lstrip_blocks = true, .max_steps = 10000};
  // (Small enough to finish without the budget, so that its absence fails
  // the test instead of hanging it.)
  const char* nested = "{% for i in range(200) %}{% for j in range(200) %}{% endfor %}{% endfor %}";
  const char* in_macro =
      "{% macro m() %}{% for i in range(1000) %}{% endfor %}{% endmacro %}{% for i in range(100) "
      "%}{{ m() "
      "}}{% endfor %}";
  for (const char* t : {nested, in_macro}) {
    SCOPED_TRACE(t);
    try {
      render(t, nlohmann::ordered_json::object(), small);
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("the render ran over 10000 steps"), std::string::npos)
          << e.what();
    }
  }
  // 99 loop iterations and their 99 statements, and the loop itself: 199 steps.
  const char* loop = "{% for i in range(99) %}{{ i % 10 }}{% endfor %}";
  EXPECT_EQ(render(loop, nlohmann::ordered_json::object(),
                   {.trim_blocks = true, .lstrip_blocks = true, .max_steps = 199})
                .size(),
            99u);
  EXPECT_THROW(render(loop, nlohmann::ordered_json::object(),
                      {.trim_blocks = true, .lstrip_blocks = true, .max_steps = 198}),
               Error);
  // 5000 messages through a loop of a few statements each, under the default.
  nlohmann::ordered_json vars;
  vars["messages"] = nlohmann::ordered_json::array();
  for (int i = 0; i < 5000; i++)
    vars["messages"].push_back({{"role", i % 2 ? "assistant" : "user"}, {"content", "hello"}});
  const std::string out = render(
      "{% for m in messages %}{% if m.role == 'user' %}<u>{{ m.content }}{% else %}<a>{{ m.content "
      "}}{% endif "
      "%}{% endfor %}",
      vars);
  EXPECT_EQ(out.size(), 5000u * 8);
}

// Inputs the fuzz target found that threw what is not an Error (std::stod's
// and std::stoll's out_of_range), which no caller catches.
TEST(Jinja, NumbersPastTheirRangeAsPython) {
  EXPECT_EQ(
      render("{{ 1e999 }} {{ -1e999 }} {{ 1e-999 }} {{ 5555555555555555555555555555.5 > 1 }}"),
      "inf -inf 0.0 True");
  EXPECT_EQ(
      render(
          R"({{ [[1, 2]]|map(attribute="1")|list }} {{ [[1, 2]]|map(attribute="99999999999999999999")|first is defined }})"),
      "[2] False");
  EXPECT_THROW(render("{{ 99999999999999999999 }}"), Error);  // int literals stay int64
}

// Values that hold themselves are refused where they would be made; values
// nested far deeper than any chat's are freed without recursion, and printing
// or comparing them ends in an error, not a stack overflow.
TEST(Jinja, CyclesAreRefusedAndDeepValuesFreedFlat) {
  const char* cycles[] = {
      "{% set l = [1] %}{{ l.append(l) }}",
      "{% set l = [1] %}{% set m = [l] %}{{ l.insert(0, m) }}",
      "{% set l = [1] %}{{ l.extend([2, [l]]) }}",
      "{% set ns = namespace(x=1) %}{% set ns.x = ns %}",
      "{% set ns = namespace(x=1) %}{% set ns.x = [{'a': ns}] %}",
      "{% set d = {'a': 1} %}{{ d.update({'b': [d]}) }}",
  };
  for (const char* t : cycles) {
    SCOPED_TRACE(t);
    try {
      render(t);
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("cannot hold itself"), std::string::npos) << e.what();
    }
  }
  // Sharing without a cycle stays allowed, as in Python.
  EXPECT_EQ(render("{% set l = [1] %}{% set m = [l, l] %}{{ m.append(l) or '' }}{{ l.append(2) or "
                   "'' }}{{ m }}"),
            "[[1, 2], [1, 2], [1, 2]]");
  // A chain of lists whose head stays in scope to the end of the render:
  // 300000 levels are freed (a recursive free overflows the stack there),
  // and 1000 print, compare or dump as an error.
  auto chain = [](int levels) {
    return "{% set ns = namespace(tail=[]) %}{% set head = ns.tail %}{% for i in range(" +
           std::to_string(levels) +
           ") %}{% set next = [] %}{{ ns.tail.append(next) or '' }}{% set ns.tail = next %}{% "
           "endfor %}";
  };
  EXPECT_EQ(render(chain(300000)), "");
  for (const char* print :
       {"{{ head }}", "{{ head|tojson }}", "{{ head == head }}", "{{ head < head }}"}) {
    SCOPED_TRACE(print);
    try {
      render(chain(1000) + print);
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("nested deeper than 512 levels"), std::string::npos)
          << e.what();
    }
  }
  // A request's JSON as deep as its client likes.
  std::string json(100000, '[');
  json += std::string(100000, ']');
  EXPECT_THROW(from_json(nlohmann::ordered_json::parse(json)), Error);
}

// Where an integer is wanted and something else is given, Python's
// TypeError or ValueError, not a crash (std::get's bad_variant_access, or an
// undefined cast of a float past int64).
TEST(Jinja, IntegersWhereSomethingElseIsGivenAreErrors) {
  const char* bad[] = {
      R"({{ [1]|tojson(indent="x") }})",   R"({{ range("3")|list }})",
      R"({{ range(3.0)|list }})",          R"({{ range(1e999)|list }})",
      R"({{ [1]|tojson(indent=1e999) }})", R"({{ [1]|tojson(indent=1e300) }})",
  };
  for (const char* t : bad) {
    SCOPED_TRACE(t);
    EXPECT_THROW(render(t), Error);
  }
  EXPECT_EQ(render("{{ [1]|tojson(indent=true) }} {{ [1]|tojson(indent=2) }}"),
            "[\n 1\n] [\n  1\n]");
}

// Python's semantics where the limits are not in the way.
TEST(Jinja, ExponentsAndIndentsAsPython) {
  EXPECT_EQ(render("{{ 1 ** 1000000000000000 }} {{ 3 ** 39 }} {{ (-2) ** 63 }} {{ 0 ** 0 }} {{ "
                   "(-1) ** 999999999999 }}"),
            "1 4052555153018976267 -9223372036854775808 1 -1");
  EXPECT_EQ(render(R"({{ "a\nb"|indent(-5) }}|{{ "a\nb"|indent(2) }})"), "a\nb|a\n  b");
  EXPECT_EQ(render("{{ range(9223372036854775806, 9223372036854775807, 2)|list }}"),
            "[9223372036854775806]");
  EXPECT_EQ(render("{{ range(5, -5, -3)|list }}"), "[5, 2, -1, -4]");
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
