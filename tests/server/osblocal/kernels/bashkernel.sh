# Bash "kernel" for execd code contexts: run inside the sandbox as
# `bash --noprofile --norc -c <this source>`.  Each request line on fd
# OSB_KFD_IN names a file holding the code, which is sourced, so variables,
# functions and the cwd persist; the exit status goes to fd OSB_KFD_OUT.
__osb_in=$OSB_KFD_IN; __osb_out=$OSB_KFD_OUT
unset OSB_KFD_IN OSB_KFD_OUT
trap 'echo "^C" >&2' INT
__osb_n=0
while IFS= read -r -u "$__osb_in" __osb_file; do
  __osb_n=$((__osb_n + 1))
  printf '{"type":"execution_count","n":%d}\n' "$__osb_n" >&"$__osb_out"
  source "$__osb_file"
  __osb_rc=$?
  rm -f "$__osb_file"
  printf '{"type":"exit","rc":%d}\n' "$__osb_rc" >&"$__osb_out"
done
