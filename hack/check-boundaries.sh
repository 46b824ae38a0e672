#!/usr/bin/env bash
# Checks the agent's package boundaries (docs/design.md) and reports the
# root package's size. It fails when a package other than cmd/ wiring and
# the runtime manager (pkg/kubelet/kuberuntime) imports
# pkg/dockertools: Docker's API stays behind one seam. It reports the
# methods of *Kubelet and the non-test lines of pkg/kubelet, most of which
# the runtime manager has taken. hack/test.sh runs it first.
set -euo pipefail
cd "$(dirname "$0")/.."

module=$(go list -m)
docker="$module/pkg/dockertools"
allowed="^($module/cmd/|$module/pkg/kubelet/kuberuntime(/|$)|$docker(/|$))"

# One line per package: path, its imports, its tests' imports.
listing=$(go list -f '{{.ImportPath}}|{{join .Imports " "}}|{{join .TestImports " "}} {{join .XTestImports " "}}' ./pkg/...)

violations=0
echo "Packages outside kuberuntime and cmd/ that import pkg/dockertools:"
while IFS='|' read -r pkg imports testImports; do
	[[ "$pkg" =~ $allowed ]] && continue
	uses=""
	for i in $imports; do
		[[ "$i" == "$docker" || "$i" == "$docker/"* ]] && uses+=" $i"
	done
	testUses=""
	for i in $testImports; do
		[[ "$i" == "$docker" || "$i" == "$docker/"* ]] && testUses+=" $i"
	done
	if [[ -n "$uses" ]]; then
		echo "  ${pkg#"$module"/}:${uses//"$module"\//}"
		violations=$((violations + 1))
	fi
	if [[ -n "$testUses" ]]; then
		echo "  ${pkg#"$module"/} (tests only):$(echo "${testUses//"$module"\//}" | tr ' ' '\n' | sort -u | tr '\n' ' ' | sed 's/ *$//')"
	fi
done <<<"$listing"
if [[ $violations -eq 0 ]]; then
	echo "  none"
fi

root=pkg/kubelet
sources=$(find "$root" -maxdepth 1 -name '*.go' ! -name '*_test.go' | sort)
# shellcheck disable=SC2086 # file names without spaces
methods=$(cat $sources | grep -cE '^func \([A-Za-z_]+ \*Kubelet\) ' || true)
# shellcheck disable=SC2086
lines=$(cat $sources | wc -l)
files=$(echo "$sources" | wc -l)
echo "*Kubelet methods: $methods (non-test files of $root only)"
echo "$root non-test lines: $lines in $files files (root package only)"

if [[ $violations -gt 0 ]]; then
	echo "FAIL: $violations packages import pkg/dockertools outside kuberuntime and cmd/" >&2
	exit 1
fi
