-- Headless Neovim 0.11+ with lsp/rewriter.lua found on the runtimepath (vim.lsp.config form):
-- vim.lsp.enable starts the server, `:Rewrite` (prompting for the instruction) rewrites a range,
-- and the end is seen in the LspProgress event; writes a JSON report like rewrite.lua.
local env = vim.fn.environ()
local report = { prompts = {}, progress = 0, messages = {} }

local function finish(status)
  report.status = status
  report.lines = vim.api.nvim_buf_get_lines(0, 0, -1, false)
  local file = io.open(env.REWRITER_NVIM_OUT, 'w')
  file:write(vim.fn.json_encode(report))
  file:close()
  vim.cmd('qall!')
end

vim.opt.runtimepath:prepend(env.REWRITER_NVIM_RUNTIME)
vim.cmd('filetype on')
vim.lsp.config('rewriter', {
  cmd = vim.fn.json_decode(env.REWRITER_NVIM_SERVER),
  init_options = vim.fn.json_decode(env.REWRITER_NVIM_OPTIONS),
  handlers = {
    ['window/showMessage'] = function(_, params) table.insert(report.messages, params.message) end,
  },
})
vim.lsp.enable('rewriter')
vim.api.nvim_create_autocmd('LspProgress', {
  callback = function(event)
    local value = event.data.params.value
    report.progress = report.progress + 1
    if value.kind == 'end' then
      report.progress_end = value.message
      report.done = true
    end
  end,
})
vim.ui.input = function(opts, on_confirm)
  table.insert(report.prompts, opts.prompt)
  on_confirm(env.REWRITER_NVIM_INSTRUCTION)
end

vim.cmd('edit ' .. vim.fn.fnameescape(env.REWRITER_NVIM_FILE))
if not vim.wait(60000, function()
  local client = vim.lsp.get_clients({ bufnr = 0, name = 'rewriter' })[1]
  return client ~= nil and client.initialized and vim.fn.exists(':Rewrite') == 2
end, 50) then
  finish('the server did not attach')
end
report.init_options = vim.lsp.get_clients({ bufnr = 0, name = 'rewriter' })[1].config.init_options
vim.cmd(env.REWRITER_NVIM_COMMAND)
if not vim.wait(120000, function() return report.done end, 50) then
  finish('timed out')
end
vim.wait(300) -- the last didChange is debounced
finish('finished')
