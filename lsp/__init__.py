"""The language server (pygls) that serves rewrites to editors; see the project's issues."""
