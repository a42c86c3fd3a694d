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

# rich_policy FILE MAX: echo_policy, plus 5 secrets read from
# BENCH_SECRET_1..5 and the 5 variables a step's env may set.
rich_policy() {
  echo_policy "$1" "$2"
  for k in 1 2 3 4 5; do printf '\n[secrets.S%s]\nfrom_env = "BENCH_SECRET_%s"\n' "$k" "$k"; done >> "$1"
  # env_allow belongs in [shell]: insert it after the search path.
  sed -i 's|^search_path = .*|&\nenv_allow = ["S1", "S2", "S3", "S4", "S5"]|' "$1"
}

# rich_plan FILE ID N: echo_plan's N steps in a plan that declares 10
# inputs; each step echoes two of them and gets the 5 secrets in its env.
rich_plan() {
  {
    printf 'version = 1\nid = "%s"\n' "$2"
    for k in $(seq 1 10); do printf '\n[inputs.i%s]\ntype = "string"\ndefault = "value-%s"\n' "$k" "$k"; done
    for i in $(seq 1 "$3"); do
      printf '\n[[steps]]\nid = "s%s"\nkind = "shell"\n' "$i"
      printf 'command = ["echo", "step-%s", "{{ inputs.i%s }}", "{{ inputs.i%s }}"]\n' "$i" $(( i % 10 + 1 )) $(( (i + 5) % 10 + 1 ))
      printf 'env = { S1 = "{{ secrets.S1 }}", S2 = "{{ secrets.S2 }}", S3 = "{{ secrets.S3 }}", S4 = "{{ secrets.S4 }}", S5 = "{{ secrets.S5 }}" }\n'
    done
    printf '\n[[steps]]\nid = "end"\nkind = "finish"\n'
  } > "$1"
}
