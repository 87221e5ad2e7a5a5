-- What the headless-Neovim scripts here share: the settings the test passes as REWRITER_NVIM_*
-- environment variables (see tests/lsp/test_lsp_nvim.py), the JSON report each writes, and the waits.
-- A script loads it from its own folder (`luafile` runs it with any working directory):
--   local here = debug.getinfo(1, 'S').source:sub(2):match('(.*/)')
--   local start = dofile(here .. 'start.lua')({ <the report's first fields> })
return function(report)
  local env = vim.fn.environ()
  local start = { env = env, report = report }

  -- Writes the report with the buffer's lines to REWRITER_NVIM_OUT and quits Neovim.
  function start.finish(status)
    report.status = status
    report.lines = vim.api.nvim_buf_get_lines(0, 0, -1, false)
    local file = io.open(env.REWRITER_NVIM_OUT, 'w')
    file:write(vim.fn.json_encode(report))
    file:close()
    vim.cmd('qall!')
  end

  -- Finishes with `status` unless check() holds within timeout_ms.
  function start.wait_for(status, check, timeout_ms, interval_ms)
    if not vim.wait(timeout_ms, check, interval_ms) then start.finish(status) end
  end

  -- Waits for report.done (the script's handler sets it), then lets the last didChange out and finishes.
  function start.finish_when_done()
    start.wait_for('timed out', function() return report.done end, 120000, 50)
    vim.wait(300) -- the last didChange is debounced
    start.finish('finished')
  end

  function start.edit_file()
    vim.cmd('edit ' .. vim.fn.fnameescape(env.REWRITER_NVIM_FILE))
  end

  -- vim.ui.input answers with REWRITER_NVIM_INSTRUCTION and notes each prompt in report.prompts.
  function start.answer_prompts()
    report.prompts = {}
    vim.ui.input = function(opts, on_confirm)
      table.insert(report.prompts, opts.prompt)
      on_confirm(env.REWRITER_NVIM_INSTRUCTION)
    end
  end

  -- lsp/editors/nvim.lua set up as docs/editors.md gives it, with `globals` (vim.g) beside the server's.
  function start.setup_plugin(globals)
    vim.g.rewriter_cmd = vim.fn.json_decode(env.REWRITER_NVIM_SERVER)
    vim.g.rewriter_options = vim.fn.json_decode(env.REWRITER_NVIM_OPTIONS)
    for name, value in pairs(globals or {}) do vim.g[name] = value end
    vim.cmd('filetype on')
    return dofile(env.REWRITER_NVIM_SETUP)
  end

  -- Whether the plugin's client has attached to the buffer and initialized (Neovim 0.7's API).
  function start.plugin_attached()
    for _, client in pairs(vim.lsp.buf_get_clients(0)) do
      if client.name == 'rewriter' and client.initialized then return true end
    end
    return false
  end

  return start
end
