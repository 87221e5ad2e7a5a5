-- Headless Neovim 0.11+ with lsp/rewriter.lua found on the runtimepath (vim.lsp.config form):
-- vim.lsp.enable starts the server, `:Rewrite` (prompting for the instruction) rewrites a range,
-- and the end is seen in the LspProgress event; writes a JSON report like rewrite.lua.
local here = debug.getinfo(1, 'S').source:sub(2):match('(.*/)')
local start = dofile(here .. 'start.lua')({ progress = 0, messages = {} })
local env, report = start.env, start.report

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
start.answer_prompts()

start.edit_file()
start.wait_for('the server did not attach', function()
  local client = vim.lsp.get_clients({ bufnr = 0, name = 'rewriter' })[1]
  return client ~= nil and client.initialized and vim.fn.exists(':Rewrite') == 2
end, 60000, 50)
report.init_options = vim.lsp.get_clients({ bufnr = 0, name = 'rewriter' })[1].config.init_options
vim.cmd(env.REWRITER_NVIM_COMMAND)
start.finish_when_done()
