package main

import (
	"strings"

	"github.com/spf13/cobra"

	"github.com/dorisarm/dorisarm/internal/scan"
)

func newScanCmd(g *globals) *cobra.Command {
	var target, format, allowFile string
	var ships []string
	opts := scan.DefaultOptions()
	opts.RequireCode = true // an input with nothing judged is bad input, never clean
	cmd := &cobra.Command{
		Use:   "scan [--target NAME] PATH...",
		Short: "Prove a build fits its target CPU and OS",
		Long: `scan walks directories, files, archives (tar, tar.gz, tar.zst, ar — GNU, BSD and
thin —, zip/jar, nested), OCI layouts (oci:DIR) and registry images, and checks
every ELF as the loader sees it (executable PT_LOAD segments, PT_DYNAMIC): its
machine against the target's, every instruction against the target CPU's
extensions (code that runs only after a CPU check — ifunc dispatch, the
outline-atomics helpers, internal/isa/dispatched.yaml, or a check recognised by
its shape — is reported as guarded), GLIBC_/GLIBCXX_ versions against the target
OS, OpenSSL linkage against the target's policy, LOAD alignment against the OS
page size; and every jar with native libraries for a linux library of the
target's architecture.

With --target it also reads back what each object was compiled with (its
.GCC.command.line, or GCC's switches in DW_AT_producer; archive members one by
one), resolves -march/-mcpu/-mtune as the driver does (the last wins) and
compares them with the target's: code for extensions the CPU lacks is an error;
a weaker architecture than the target's -march (lost tuning), flags it cannot
resolve and compiled code with no record are warnings, errors with
--require-target-flags, and waivable in the allow file (kinds lost-tuning,
flags-unresolved, flags-unrecorded).

A registry image is scanned only when the argument clearly names one:
docker://REF, or HOST/REPO:TAG or HOST/REPO@DIGEST with a registry host (a dot,
a port or localhost). A path that does not exist, a FIFO or a device is bad
input. A limit (--max-member, --max-bytes, --max-entries, --max-depth, --max-window) that is
hit is an unreadable finding naming it, never a silent truncation.

The glibc, GLIBCXX, OpenSSL and page-size checks (matrix.yaml
scan.deployment_checks) judge what a build ships for deployment. With --ship
GLOB (repeated) only the files whose path, as the report names it, matches a
glob ship (a glob matching a directory, archive or jar ships what is in it);
every other file (a third-party build tool, a library the BE does not take)
is still judged for foreign code and instructions the CPU lacks. Relocatable
objects (archive members, .o files) are judged for those alone: the rest is
judged where they are linked. Each file's scope is in the report. Without
--ship every file ships.

An input with nothing in it the scanner judges (a directory of text files,
an archive of them) is bad input, never clean: nothing was checked.

Without --target it reports what it found. Exit status: 0 clean, 1 violations,
2 bad input or usage (nothing to judge included), 3 the machine or the network
failed (a registry that cannot be reached, a full disk).`,
		Example: `  dorisarm scan --target kunpeng920 out/2.1.8/kunpeng920
  dorisarm scan --target graviton3 -o sarif apache-doris-2.1.8-bin-arm64.tar.gz > scan.sarif
  dorisarm scan --target kunpeng920 --allow scan-allow.yaml oci:out/registry
  dorisarm scan --target kunpeng920 --ship 'thirdparty/installed/lib64/openssl-shared' out/2.1.7/kunpeng920
  dorisarm scan --target graviton3 docker://registry.example.com/doris/doris-be:2.1.8-graviton3
  dorisarm scan /usr/lib/aarch64-linux-gnu/libcrypto.so.3`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if opts.Workers < 0 {
				return usageErr("--jobs %d: give how many files may be analysed at once, 1 or more (0: one per CPU)", opts.Workers)
			}
			rep, err := scan.Run(cmd.Context(), scan.Request{Inputs: args, Target: target, AllowFile: allowFile, Ships: ships, Matrix: g.loadMatrix, Options: opts})
			if err != nil {
				return err
			}
			if err := scan.Write(g.stdout, rep, format); err != nil {
				return err
			}
			return rep.Err()
		},
	}
	cmd.Flags().StringVar(&target, "target", "", "the target whose policy applies (see dorisarm matrix)")
	formatFlag(cmd, &format, "output: "+strings.Join(scan.Formats, ", "), scan.Formats...)
	cmd.Flags().StringArrayVar(&ships, "ship", nil, "a glob of the paths that ship for deployment (repeat it); the deployment checks judge those files alone (default: every file ships)")
	cmd.Flags().StringVar(&allowFile, "allow", "", "reviewed exceptions (YAML: exceptions: [{path, kind, feature, reason}])")
	inputFlags(cmd, false, "allow")
	cmd.Flags().IntVar(&opts.MaxDepth, "max-depth", opts.MaxDepth, "archive nesting to follow")
	cmd.Flags().Int64Var(&opts.MaxBytes, "max-bytes", opts.MaxBytes, "bytes to read out of archives, in all")
	cmd.Flags().IntVar(&opts.MaxEntries, "max-entries", opts.MaxEntries, "archive entries to read, in all")
	cmd.Flags().Int64Var(&opts.MaxMember, "max-member", opts.MaxMember, "largest archive member to read")
	cmd.Flags().Int64Var(&opts.MaxWindow, "max-window", opts.MaxWindow, "decompression memory (zstd windows, xz/lzma dictionaries) of all open compressed streams, nested ones included")
	cmd.Flags().IntVar(&opts.Workers, "jobs", 0, "files analysed at once (default: the number of CPUs)")
	cmd.Flags().BoolVar(&opts.Insecure, "insecure", false, "allow plain-HTTP registries that are not on loopback")
	cmd.Flags().BoolVar(&opts.RequireTargetFlags, "require-target-flags", false, "fail on objects compiled below the target's -march (lost tuning) or with no or unresolvable recorded flags (warnings otherwise)")
	registryTimeoutFlag(cmd, &opts.RegistryStall)
	registryMinRateFlag(cmd, &opts.RegistryMinRate)
	return cmd
}
