"""The tool algebra: schemas, validation, the canonical form, and mappings from other agents."""

from __future__ import annotations

from swemill.core.toolmap import (
    from_bash_agent,
    from_claude_code,
    from_swe_agent_action,
    from_swe_agent_tool_call,
)
from swemill.core.tools import (
    TOOL_NAMES,
    ToolCall,
    anthropic_tools,
    normalize_command,
    normalize_path,
    tool_schemas,
    validate_call,
)


def test_every_tool_has_an_openai_and_an_anthropic_schema() -> None:
    schemas = tool_schemas()
    assert [s["function"]["name"] for s in schemas] == list(TOOL_NAMES)
    for s in schemas:
        assert s["type"] == "function"
        params = s["function"]["parameters"]
        assert params["type"] == "object" and params["additionalProperties"] is False
        assert s["function"]["description"]
        assert "title" not in params
    read = next(s for s in schemas if s["function"]["name"] == "read")["function"]["parameters"]
    assert read["required"] == ["path"]
    assert read["properties"]["start_line"] == {
        "description": "First line to read.", "minimum": 1, "type": "integer"
    }
    edit = anthropic_tools()[TOOL_NAMES.index("edit")]
    assert edit["name"] == "edit"
    assert set(edit["input_schema"]["required"]) == {"path", "old_str", "new_str"}


def test_validate_call_reports_format_errors_one_per_argument() -> None:
    assert validate_call(ToolCall("bash", {"command": "ls"})) == []
    assert validate_call(ToolCall("submit")) == []
    assert validate_call(ToolCall("read", {"path": "a", "start_line": "5"})) == [
        "read.start_line: Input should be a valid integer"
    ]
    assert validate_call(ToolCall("read", {"path": "a", "start_line": 9, "end_line": 3})) == [
        "read.end_line: must not be before start_line"
    ]
    assert validate_call(ToolCall("edit", {"path": "a"})) == [
        "edit.old_str: Field required",
        "edit.new_str: Field required",
    ]
    assert validate_call(ToolCall("bash", {"command": "ls", "cwd": "/"})) == [
        "bash.cwd: Extra inputs are not permitted"
    ]
    assert validate_call(ToolCall("run_tests", {"tests": "t.py"}))  # a string is not a list
    assert validate_call(ToolCall("other:TodoWrite", {}))[0].startswith("unknown tool")


def test_positional_and_keyword_construction_agree() -> None:
    positional = ToolCall("read", {"path": "a"}, "c1")
    assert positional == ToolCall(name="read", args={"path": "a"}, id="c1")
    assert ToolCall.model_validate({"name": "submit"}).args == {}


def test_paths_compare_equal_canonically() -> None:
    a = ToolCall("read", {"path": "/workspace/./a.py"})
    b = ToolCall("read", {"path": "a.py"})
    assert a != b
    assert a.canonical() == b.canonical()
    assert a.canonical_key() == b.canonical_key()
    assert normalize_path("/workspace/x/../y") == "y"
    assert normalize_path("./a") == "a"
    assert normalize_path("/workspace") == "."
    assert normalize_path("/workspace/../etc/passwd") == "/etc/passwd"  # outside stays absolute
    assert normalize_path("/home/u/proj/src/m.py", "/home/u/proj/") == "src/m.py"


def test_bash_whitespace_collapses_outside_quotes_only() -> None:
    a = ToolCall("bash", {"command": "  grep  -rn   'a  b'   src |  wc -l \n"}, "x")
    b = ToolCall("bash", {"command": "grep -rn 'a  b' src | wc -l"}, "y")
    assert a.canonical() == b.canonical()
    assert a.canonical().id == ""
    # Inside quotes whitespace is data: these are different commands.
    c = ToolCall("bash", {"command": "grep -rn 'a b' src | wc -l"})
    assert c.canonical_key() != b.canonical_key()
    assert normalize_command('python -c "\nif x:\n    y()"') == 'python -c "\nif x:\n    y()"'
    assert normalize_command("cd  /w \n\n   ls   -l") == "cd /w\nls -l"
    assert normalize_command('echo  "a\\"  b"   c') == 'echo "a\\"  b" c'


def test_bash_fallbacks_keep_text_that_cannot_be_collapsed_safely() -> None:
    heredoc = "cat <<EOF > f.py\n   x  =  1\nEOF"
    assert normalize_command(heredoc) == heredoc
    unbalanced = "echo  'oops"
    assert normalize_command("  " + unbalanced) == unbalanced


def test_defaults_are_dropped_and_keys_sorted() -> None:
    assert ToolCall("read", {"path": "a", "start_line": 1}).canonical() == ToolCall(
        "read", {"path": "a"}
    ).canonical()
    assert ToolCall("edit", {"path": "a", "old_str": "x", "new_str": "y", "replace_all": False}
                    ).canonical().args == {"new_str": "y", "old_str": "x", "path": "a"}
    assert list(ToolCall("search", {"pattern": "p", "path": "/workspace"}).canonical().args) == [
        "pattern"
    ]
    t1 = ToolCall("run_tests", {"tests": ["b", "a", "a"]}).canonical()
    assert t1.args == {"tests": ["a", "b"]}
    assert ToolCall("run_tests", {"tests": []}).canonical() == ToolCall("run_tests").canonical()
    other = ToolCall("other:TodoWrite", {"z": 1, "a": 2}).canonical()
    assert list(other.args) == ["a", "z"]


def test_claude_code_tools_map_into_the_algebra() -> None:
    cwd = "/home/dev/proj"
    bash = from_claude_code("Bash", {"command": "pytest -q", "description": "run"}, "t1", cwd)
    assert bash == [ToolCall("bash", {"command": "pytest -q"}, "t1")]
    read = from_claude_code("Read", {"file_path": f"{cwd}/src/a.py", "offset": 10, "limit": 5},
                            "t2", cwd)
    assert read == [ToolCall("read", {"path": "src/a.py", "start_line": 10, "end_line": 14}, "t2")]
    write = from_claude_code("Write", {"file_path": f"{cwd}/n.py", "content": "x"}, "t3", cwd)
    assert write[0].name == "write" and write[0].args["path"] == "n.py"
    # An Edit with an empty old_string creates the file in Claude Code: that is a write.
    create = from_claude_code("Edit", {"file_path": f"{cwd}/c.py", "old_string": "",
                                       "new_string": "body"}, "t4", cwd)
    assert create == [ToolCall("write", {"path": "c.py", "content": "body"}, "t4")]
    multi = from_claude_code("MultiEdit", {"file_path": f"{cwd}/m.py", "edits": [
        {"old_string": "a", "new_string": "b"},
        {"old_string": "c", "new_string": "d", "replace_all": True}]}, "t5", cwd)
    assert [c.name for c in multi] == ["edit", "edit"]
    assert {c.id for c in multi} == {"t5"}
    assert multi[1].args["replace_all"] is True
    grep = from_claude_code("Grep", {"pattern": "def f", "path": f"{cwd}/src", "glob": "*.py",
                                     "-i": True}, "t6", cwd)
    assert grep == [ToolCall("search", {"pattern": "def f", "glob": "*.py", "path": "src"}, "t6")]
    glob = from_claude_code("Glob", {"pattern": "**/*.md"}, "t7", cwd)
    assert glob[0].args == {"pattern": "", "glob": "**/*.md"}
    ls = from_claude_code("LS", {"path": f"{cwd}/my dir"}, "t8", cwd)
    assert ls[0].args == {"command": "ls -a 'my dir'"}
    for call in bash + read + write + create + multi + grep + glob + ls:
        assert validate_call(call) == [], call


def test_tools_outside_the_algebra_pass_through_with_their_name() -> None:
    todo = from_claude_code("TodoWrite", {"todos": [{"id": "1"}]}, "t9")
    assert todo == [ToolCall("other:TodoWrite", {"todos": [{"id": "1"}]}, "t9")]
    assert todo[0].is_other
    assert from_claude_code("mcp__github__get_issue", "raw")[0].args == {"input": "raw"}
    # A known tool with unusable input is not guessed at either.
    assert from_claude_code("Read", {})[0].name == "other:Read"


def test_bash_only_agents_stay_bash() -> None:
    call = from_bash_agent("cat   src/a.py")
    assert call.name == "bash"
    assert call.canonical() == from_bash_agent("cat src/a.py").canonical()


def test_swe_agent_actions_map() -> None:
    root = "/testbed"
    assert from_swe_agent_action("submit").name == "submit"
    view = from_swe_agent_action("str_replace_editor view /testbed/a.py --view_range 3 9", "", root)
    assert view == ToolCall("read", {"path": "a.py", "start_line": 3, "end_line": 9})
    edit = from_swe_agent_action(
        "str_replace_editor str_replace /testbed/a.py --old_str 'x = 1' --new_str 'x = 2'", "", root
    )
    assert edit.args == {"path": "a.py", "old_str": "x = 1", "new_str": "x = 2"}
    assert from_swe_agent_action("open a.py 30").name == "other:open"
    assert from_swe_agent_action("python reproduce.py").args == {"command": "python reproduce.py"}
    created = from_swe_agent_tool_call(
        "str_replace_editor", '{"command": "create", "path": "/testbed/n.py", "file_text": "hi"}',
        "call_1", root)
    assert created == ToolCall("write", {"path": "n.py", "content": "hi"}, "call_1")
    assert from_swe_agent_tool_call("bash", "{not json").name == "other:bash"


def test_tool_schemas_are_made_once_but_handed_out_as_copies() -> None:
    first = tool_schemas()
    first[0]["function"]["parameters"]["properties"].clear()
    first[0]["function"]["parameters"]["required"] = ["nothing"]
    again = tool_schemas()
    assert again[0]["function"]["parameters"]["properties"]
    assert again[0]["function"]["parameters"].get("required") != ["nothing"]
