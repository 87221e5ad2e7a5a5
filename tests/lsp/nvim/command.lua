-- Headless Neovim with the setup of docs/editors.md (lsp/editors/nvim.lua): `:Rewrite` on a line range,
-- the instruction typed at the vim.ui.input prompt; writes a JSON report like rewrite.lua.
local here = debug.getinfo(1, 'S').source:sub(2):match('(.*/)')
local start = dofile(here .. 'start.lua')({})
local report = start.report

local rewriter = start.setup_plugin()
rewriter.on_done = function(err, result)
  report.error = err and err.message or nil
  report.result = result
  report.done = true
end
start.answer_prompts()

start.edit_file()
start.wait_for('the server did not attach', start.plugin_attached, 60000, 50)
vim.cmd(start.env.REWRITER_NVIM_COMMAND)
start.finish_when_done()
