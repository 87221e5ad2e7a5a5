-- Headless Neovim 0.11+: lsp/rewriter.lua's on_attach with a client that offers inline completion
-- (a stand-in: no server runs). On this Neovim the real path is the one for 0.11 (a message, once,
-- nothing enabled); the 0.12 path runs against a stand-in vim.lsp.inline_completion and
-- vim.fn.has, which checks the wiring (enable for the buffer, the key's fallback), not 0.12 itself.
-- Writes a JSON report like rewrite.lua.
local here = debug.getinfo(1, 'S').source:sub(2):match('(.*/)')
local start = dofile(here .. 'start.lua')({ messages = {}, cases = {} })
local env, report = start.env, start.report

vim.notify = function(message) table.insert(report.messages, message) end
local config = dofile(env.REWRITER_NVIM_RUNTIME .. '/lsp/rewriter.lua')
local client = {
  supports_method = function(_, method) return method == 'textDocument/inlineCompletion' end,
  request = function() end,
}

-- on_attach in a new buffer with vim.g set as given; what it did there.
local function attach(globals)
  for name, value in pairs(globals) do vim.g[name] = value end
  local bufnr = vim.api.nvim_create_buf(true, false)
  local ok, err = pcall(config.on_attach, client, bufnr)
  for name in pairs(globals) do vim.g[name] = nil end
  local mapped = {}
  for _, map in ipairs(vim.api.nvim_buf_get_keymap(bufnr, 'i')) do
    mapped[map.lhs] = map
  end
  return { ok = ok, err = err and tostring(err), bufnr = bufnr, mapped = mapped,
    commands = vim.tbl_keys(vim.api.nvim_buf_get_commands(bufnr, {})), messages = #report.messages }
end

local function summary(case)
  return { ok = case.ok, err = case.err, keys = vim.tbl_keys(case.mapped), commands = case.commands, messages = case.messages }
end

-- An error finishes the report, rather than leaving Neovim waiting at its message.
local ok, err = pcall(function()
  report.version_is_012 = vim.fn.has('nvim-0.12') == 1
  report.declared_here = config.capabilities ~= nil
  report.cases.off = summary(attach({ rewriter_next_edit = false }))
  report.cases.here = summary(attach({}))
  report.cases.here_again = summary(attach({}))

  -- The 0.12 path, against a stand-in.
  local enabled, accepts = {}, true
  local has = vim.fn.has
  vim.fn.has = function(feature) return feature == 'nvim-0.12' and 1 or has(feature) end
  vim.lsp.inline_completion = {
    enable = function(enable, filter) table.insert(enabled, { enable = enable, bufnr = filter.bufnr }) end,
    get = function() return accepts end,
  }
  -- Loaded on 0.12: the client declares inline completion (beside Neovim's own capabilities), so
  -- that the server loads the suggestions' model ahead; not where suggestions are off.
  local loaded = dofile(env.REWRITER_NVIM_RUNTIME .. '/lsp/rewriter.lua')
  report.declared_on_012 = loaded.capabilities ~= nil and loaded.capabilities.textDocument.inlineCompletion ~= nil
  report.keeps_neovims_own = loaded.capabilities ~= nil and loaded.capabilities.textDocument.synchronization ~= nil
  vim.g.rewriter_next_edit = false
  report.declared_when_off = dofile(env.REWRITER_NVIM_RUNTIME .. '/lsp/rewriter.lua').capabilities ~= nil
  vim.g.rewriter_next_edit = nil
  local tab = attach({})
  report.cases.stand_in = summary(tab)
  report.enabled = enabled
  report.enabled_bufnr_matches = enabled[1] ~= nil and enabled[1].bufnr == tab.bufnr
  local callback = tab.mapped['<Tab>'] and tab.mapped['<Tab>'].callback
  report.tab_expr = tab.mapped['<Tab>'] and tab.mapped['<Tab>'].expr
  report.tab_when_accepted = callback and tostring((callback()))
  accepts = false
  report.tab_when_nothing_shown = callback and tostring((callback()))
  report.cases.other_key = summary(attach({ rewriter_next_edit_key = '<C-l>' }))
  report.cases.no_key = summary(attach({ rewriter_next_edit_key = false }))
  report.cases.off_stand_in = summary(attach({ rewriter_next_edit = false }))
  vim.fn.has = has
  vim.lsp.inline_completion = nil
end)
report.error = not ok and tostring(err) or nil
start.finish(ok and 'finished' or 'error')
