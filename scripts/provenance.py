#!/usr/bin/env python3
"""The unsigned SLSA provenance (v1) of release files: an in-toto Statement (v1) on stdout.

    scripts/provenance.py FILE...        (`just provenance FILE...`)

Its subjects are the FILEs, each by name and sha256. Its predicate says how they were built
(the build type is described in docs/verify.md#provenance):
  externalParameters    the source repository and ref, and, under GitHub Actions, the workflow
  internalParameters    the rustc and cargo that built them
  resolvedDependencies  the source commit (gitCommit) and Cargo.lock (sha256)
  runDetails            the builder: the workflow run (its GITHUB_WORKFLOW_REF and run URL), or
                        a local build (which also says whether the work tree had changes the
                        commit does not hold); when it started (BUILD_STARTED_ON, RFC 3339)
                        and finished
Nothing here needs the network: the release workflow signs the statement's predicate with
cosign (keyless, from its OIDC identity) for each file, the image and the chart.
"""
import datetime
import hashlib
import json
import os
import subprocess
import sys

DOCS = "https://github.com/kronjob/kronjob/blob/main/docs/verify.md"
BUILD_TYPE = f"{DOCS}#provenance"
LOCAL_BUILDER = f"{DOCS}#local-builds"


def run(*args):
    try:
        return subprocess.run(args, check=True, capture_output=True, text=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def main(files):
    if not files:
        sys.exit("usage: provenance.py FILE...")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = os.environ.get
    github = env("GITHUB_ACTIONS") == "true"
    if github:
        server, repo = env("GITHUB_SERVER_URL", "https://github.com"), env("GITHUB_REPOSITORY")
        repository, ref, commit = f"{server}/{repo}", env("GITHUB_REF"), env("GITHUB_SHA")
        # owner/repo/.github/workflows/release.yml@refs/tags/v1.2.3
        workflow_ref = env("GITHUB_WORKFLOW_REF", "")
        workflow_path = workflow_ref.split("@")[0].split("/", 2)[-1]
        builder = f"{server}/{workflow_ref}"
        invocation = f"{repository}/actions/runs/{env('GITHUB_RUN_ID')}/attempts/{env('GITHUB_RUN_ATTEMPT', '1')}"
    else:
        repository = run("git", "-C", root, "remote", "get-url", "origin") or "unknown"
        ref = run("git", "-C", root, "symbolic-ref", "-q", "HEAD") or "HEAD"
        commit = run("git", "-C", root, "rev-parse", "HEAD")
        workflow_path, builder, invocation = None, LOCAL_BUILDER, None
    external = {"repository": repository, "ref": ref}
    internal = {"rustc": run("rustc", "--version"), "cargo": run("cargo", "--version")}
    if not github:
        internal["workTreeModified"] = bool(run("git", "-C", root, "status", "--porcelain"))
    if workflow_path:
        external["workflow"] = workflow_path
    dependencies = [{"uri": f"git+{repository}@{ref}", "digest": {"gitCommit": commit}}]
    dependencies.append({"uri": "Cargo.lock", "digest": {"sha256": sha256(os.path.join(root, "Cargo.lock"))}})
    metadata = {"finishedOn": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")}
    if env("BUILD_STARTED_ON"):
        metadata["startedOn"] = env("BUILD_STARTED_ON")
    if invocation:
        metadata["invocationId"] = invocation
    statement = {
        "_type": "https://in-toto.io/Statement/v1",
        "subject": [{"name": os.path.basename(f), "digest": {"sha256": sha256(f)}} for f in files],
        "predicateType": "https://slsa.dev/provenance/v1",
        "predicate": {
            "buildDefinition": {
                "buildType": BUILD_TYPE,
                "externalParameters": external,
                "internalParameters": internal,
                "resolvedDependencies": dependencies,
            },
            "runDetails": {"builder": {"id": builder}, "metadata": metadata},
        },
    }
    json.dump(statement, sys.stdout, indent=2)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main(sys.argv[1:])
