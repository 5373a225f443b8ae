#!/usr/bin/env bash
# Publishes the Colab edition that the book's build wrote (_build/colab: every chapter as a
# plain notebook, _ext/colab.py) to a branch of its own, which the site's Colab buttons open:
#
#   bash scripts/publish_colab.sh                  # to origin's "colab" branch
#   bash scripts/publish_colab.sh REMOTE [BRANCH]  # a remote's name, URL or path
#   EDITION=folder bash scripts/publish_colab.sh   # another edition folder
#
# The branch holds one commit, replaced at every publication: the edition pins the library's
# commit in each install cell, so its own history says nothing. The commit is made from this
# repository (so that the remote's credentials, as GitHub Actions sets them, serve the push),
# through a scratch index: neither the checkout nor its index is touched.
set -euo pipefail
cd "$(dirname "$0")/.."
remote=${1:-origin}
branch=${2:-colab}
edition=$(realpath -m "${EDITION:-_build/colab}")
if ! ls "$edition"/book/*.ipynb >/dev/null 2>&1; then
  echo "no Colab edition in $edition: build the book first (scripts/book.sh, or scripts/build_book.py --stored-outputs)" >&2
  exit 1
fi
source_commit=$(git rev-parse HEAD)
index=$(mktemp)
trap 'rm -f "$index"' EXIT
rm -f "$index"  # git writes a fresh index there
export GIT_INDEX_FILE=$index
git --work-tree="$edition" add -A -f .
tree=$(git write-tree)
export GIT_AUTHOR_NAME=${GIT_AUTHOR_NAME:-Toy Transformers} GIT_AUTHOR_EMAIL=${GIT_AUTHOR_EMAIL:-book@toy-transformers.invalid}
export GIT_COMMITTER_NAME=${GIT_COMMITTER_NAME:-$GIT_AUTHOR_NAME} GIT_COMMITTER_EMAIL=${GIT_COMMITTER_EMAIL:-$GIT_AUTHOR_EMAIL}
commit=$(git commit-tree "$tree" -m "The Colab edition of $source_commit")
git push --quiet --force "$remote" "$commit:refs/heads/$branch"
echo "published the Colab edition of $source_commit to $remote $branch ($commit)"
