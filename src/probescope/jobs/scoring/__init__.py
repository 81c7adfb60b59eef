r"""The Gallery's and \`probescope score\`'s scoring as jobs and Qt-free state (the window holds views only)."""
