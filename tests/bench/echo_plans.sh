# Shared by the bench scripts (sourced, not run): the policy and the plans of
# `echo` steps they generate.

# echo_policy FILE MAX: a policy allowing `echo`, with budgets of MAX.
echo_policy() {
  cat > "$1" <<POLICY
version = 1
[shell]
search_path = ["/usr/bin", "/bin"]
[[shell.allow]]
program = "echo"
prefix = true
[budget]
max_steps = $2
max_tool_calls = $2
POLICY
}

# echo_plan FILE ID N: N `echo step-<i>` steps, then a `finish` step.
echo_plan() {
  {
    printf 'version = 1\nid = "%s"\n' "$2"
    for i in $(seq 1 "$3"); do printf '\n[[steps]]\nid = "s%s"\nkind = "shell"\ncommand = ["echo", "step-%s"]\n' "$i" "$i"; done
    printf '\n[[steps]]\nid = "end"\nkind = "finish"\n'
  } > "$1"
}
