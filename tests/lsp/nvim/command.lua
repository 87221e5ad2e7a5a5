-- Headless Neovim with the setup of docs/editors.md (lsp/editors/nvim.lua): `:Rewrite` on a line range,
-- the instruction typed at the vim.ui.input prompt; writes a JSON report like rewrite.lua.
local env = vim.fn.environ()
local report = { prompts = {} }

local function finish(status)
  report.status = status
  report.lines = vim.api.nvim_buf_get_lines(0, 0, -1, false)
  local file = io.open(env.REWRITER_NVIM_OUT, 'w')
  file:write(vim.fn.json_encode(report))
  file:close()
  vim.cmd('qall!')
end

vim.g.rewriter_cmd = vim.fn.json_decode(env.REWRITER_NVIM_SERVER)
vim.g.rewriter_options = vim.fn.json_decode(env.REWRITER_NVIM_OPTIONS)
vim.cmd('filetype on')
local rewriter = dofile(env.REWRITER_NVIM_SETUP)
rewriter.on_done = function(err, result)
  report.error = err and err.message or nil
  report.result = result
  report.done = true
end
vim.ui.input = function(opts, on_confirm)
  table.insert(report.prompts, opts.prompt)
  on_confirm(env.REWRITER_NVIM_INSTRUCTION)
end

vim.cmd('edit ' .. vim.fn.fnameescape(env.REWRITER_NVIM_FILE))
if not vim.wait(60000, function()
  for _, client in pairs(vim.lsp.buf_get_clients(0)) do
    if client.name == 'rewriter' and client.initialized then return true end
  end
  return false
end, 50) then
  finish('the server did not attach')
end
vim.cmd(env.REWRITER_NVIM_COMMAND)
if not vim.wait(120000, function() return report.done end, 50) then
  finish('timed out')
end
vim.wait(300)
finish('finished')
