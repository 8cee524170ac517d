#!/usr/bin/env bash
# Real-browser check of a rendered report: opens REPORT.html in headless Chromium (Debian's
# `chromium` package, installed with apt-get when missing and this shell may), saves a
# screenshot, and checks in the rendered DOM that every table and every chart of the HTML
# is there AND was laid out with a non-zero size.
#
# The report itself has no scripts (it is self-contained and static). To measure layout, a
# copy of it gets one small script appended that records, after rendering, how many
# `table.report-table` and `svg[data-chart]` elements have a non-empty bounding box;
# Chromium's --dump-dom then prints the DOM including that record.
#
# Usage: scripts/check_report_html.sh REPORT.html [SCREENSHOT.png] [HEIGHT_PX]
# Exit: 0 all rendered, 1 something missing, 2 usage, 3 no Chromium and none installable.
set -euo pipefail

if [[ $# -lt 1 || ! -f "$1" ]]; then
    echo "usage: $0 REPORT.html [SCREENSHOT.png] [HEIGHT_PX]" >&2
    exit 2
fi
html=$(realpath "$1")
png=${2:-${html%.html}.png}
height=${3:-12000}

find_browser() {
    command -v chromium || command -v chromium-browser || command -v google-chrome || true
}
browser=$(find_browser)
if [[ -z "$browser" ]]; then
    echo "chromium not found: installing Debian's chromium package" >&2
    if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null; then
        (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium) >&2 || true
    elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
        (sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium) >&2 || true
    fi
    browser=$(find_browser)
    if [[ -z "$browser" ]]; then
        echo "no chromium and it cannot be installed here (apt-get as root or password-less sudo needed)" >&2
        exit 3
    fi
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
probe="$work/probe.html"
# Append the layout probe just before </body>.
sed 's#</body>#<script>\
(function () {\
  var box = function (e) { var r = e.getBoundingClientRect(); return r.width > 0 \&\& r.height > 0; };\
  var t = Array.prototype.slice.call(document.querySelectorAll("table.report-table"));\
  var s = Array.prototype.slice.call(document.querySelectorAll("svg[data-chart]"));\
  var pre = document.createElement("pre");\
  pre.id = "render-check";\
  pre.textContent = "tables " + t.filter(box).length + "/" + t.length + " charts " + s.filter(box).length + "/" + s.length;\
  document.body.appendChild(pre);\
})();\
</script></body>#' "$html" > "$probe"

flags=(--headless --no-sandbox --disable-gpu --disable-dev-shm-usage --hide-scrollbars
       --no-first-run --user-data-dir="$work/profile" --virtual-time-budget=15000)
"$browser" "${flags[@]}" --window-size=1400,900 --dump-dom "file://$probe" > "$work/dom.html" 2> "$work/dom.log" || {
    echo "chromium --dump-dom failed:" >&2; tail -20 "$work/dom.log" >&2; exit 1; }
"$browser" "${flags[@]}" --window-size="1400,$height" --screenshot="$png" "file://$html" > "$work/shot.log" 2>&1 || {
    echo "chromium --screenshot failed:" >&2; tail -20 "$work/shot.log" >&2; exit 1; }

count() { grep -o "$1" "$2" | wc -l | tr -d ' '; }
src_tables=$(count '<table class="report-table"' "$html")
src_charts=$(count '<svg [^>]*data-chart=' "$html")
dom_tables=$(count '<table class="report-table"' "$work/dom.html")
dom_charts=$(count '<svg [^>]*data-chart=' "$work/dom.html")
check=$(grep -o 'tables [0-9]*/[0-9]* charts [0-9]*/[0-9]*' "$work/dom.html" || true)
png_bytes=$(stat -c %s "$png" 2>/dev/null || echo 0)

echo "html:       $html"
echo "browser:    $($browser --version 2>/dev/null || echo "$browser")"
echo "source:     $src_tables tables, $src_charts charts"
echo "DOM:        $dom_tables tables, $dom_charts charts"
echo "laid out:   ${check:-no layout record (the probe script did not run)}"
echo "screenshot: $png ($png_bytes bytes)"

ok=1
[[ "$src_tables" -gt 0 ]] || { echo "FAIL: the HTML has no report tables" >&2; ok=0; }
[[ "$dom_tables" == "$src_tables" ]] || { echo "FAIL: $src_tables tables in the HTML, $dom_tables in the DOM" >&2; ok=0; }
[[ "$dom_charts" == "$src_charts" ]] || { echo "FAIL: $src_charts charts in the HTML, $dom_charts in the DOM" >&2; ok=0; }
[[ "$check" == "tables $src_tables/$src_tables charts $src_charts/$src_charts" ]] || {
    echo "FAIL: not every table and chart was laid out with a size ($check)" >&2; ok=0; }
[[ "$png_bytes" -gt 10000 ]] || { echo "FAIL: screenshot missing or blank ($png_bytes bytes)" >&2; ok=0; }
if [[ $ok -eq 1 ]]; then
    echo "OK: every table and chart rendered"
    exit 0
fi
exit 1
