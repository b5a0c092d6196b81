# Sourced by tests/run_all.sh (its run_suite, skip_suite, $build, $root, $log_dir): the
# Windows build of `make windows` (WINDOWS_BUILD, default build-windows) under Debian's
# wine64. The Linux build's conformance suite drives each .exe through real pipes (every
# check, the sentinel's exact bytes and "no CR byte ever" included); the stop request is
# SIGINT, which Wine turns into the CTRL_C_EVENT a Windows engine takes for SIGTERM.
# tests/windows/wine_e2e.py: the negative control, the oracle fixtures, coli.exe chat.
win_suites=(conformance-windows-echo conformance-windows-engine windows-wine-e2e)
win="${WINDOWS_BUILD:-$root/build-windows}/main"
wine=/usr/lib/wine/wine64
if [[ ! -x "$wine" ]]; then
    for s in "${win_suites[@]}"; do skip_suite "$s" "wine64 is not installed (make deps)"; done
elif [[ ! -f "$win/inkling.exe" || ! -f "$win/coli.exe" || ! -f "$win/echo-engine-text-stdio.exe" ]]; then
    for s in "${win_suites[@]}"; do skip_suite "$s" "no Windows build in $win (make windows)"; done
else
    # Wine takes only an absolute prefix ($build is relative under make test).
    export WINEPREFIX="$(realpath -m "$build")/wineprefix" WINEDEBUG=-all
    # The prefix (~15 s, once per build folder), then one wine server for all the suites
    # (each .exe would otherwise start and stop one).
    mkdir -p "$WINEPREFIX"
    timed 300 "$log_dir/wineprefix.log" "$wine" wineboot --init || echo "wine: wineboot failed; see $log_dir/wineprefix.log"
    /usr/lib/wine/wineserver -p
    run_suite conformance-windows-echo "$build/protocol-conformance" --scratch "$log_dir" --stop-signal INT -- \
        "$wine" "$win/echo-engine.exe"
    run_suite conformance-windows-engine "$build/protocol-conformance" --prompt "1 2 3 4 5" --keys ids=1 \
        --scratch "$log_dir" --stop-signal INT -- "$wine" "$win/inkling.exe" serve \
        --model "$build/fixtures/base-hf-f32" --slots 1 --ctx 256 --threads 2
    run_suite windows-wine-e2e /usr/bin/python3 "$root/tests/windows/wine_e2e.py" "$build" "$win"
    /usr/lib/wine/wineserver -k
fi
