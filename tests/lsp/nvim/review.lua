-- Headless Neovim with lsp/editors/nvim.lua and the review on: `:RewriteFile` proposes, the preview
-- shows, `:RewriteTryAnother` asks for another candidate, `:RewriteAccept` / `:RewriteReject` /
-- `:RewriteAcceptAll` decide; writes a JSON report.
local here = debug.getinfo(1, 'S').source:sub(2):match('(.*/)')
local start = dofile(here .. 'start.lua')({ proposals = 0, decisions = {}, steps = {} })
local report = start.report

local function wait_for(what, check)
  start.wait_for('timed out waiting for ' .. what, check, 120000, 20)
end

local rewriter = start.setup_plugin({ rewriter_review = true, maplocalleader = ',' })
local review = rewriter.review
local final
rewriter.on_done = function(err, result)
  report.error = err and err.message or nil
  report.result = result
end
review.on_proposal = function(params)
  report.proposals = report.proposals + 1
  if params.final then final = params end
end
review.on_ended = function(params) report.ended = params end
local decided = 0
review.on_decided = function(err, result)
  table.insert(report.decisions, err and err.message or result.status)
  decided = decided + 1
end

start.edit_file()
wait_for('the server', start.plugin_attached)
local original = vim.api.nvim_buf_get_lines(0, 0, -1, false)
vim.cmd('RewriteFile Add docstrings')
wait_for('the proposal', function() return report.result ~= nil and final ~= nil end)
local ns = vim.api.nvim_get_namespaces().rewriter_review
local marks = vim.api.nvim_buf_get_extmarks(0, ns, 0, -1, { details = true })
report.previews = 0
for _, mark in ipairs(marks) do
  if mark[4].virt_lines then report.previews = report.previews + 1 end
end
report.unchanged_while_proposed = vim.deep_equal(vim.api.nvim_buf_get_lines(0, 0, -1, false), original)
report.hunks = #final.hunks

local function decide(keys, count)
  vim.api.nvim_win_set_cursor(0, { 1, 0 }) -- each decision takes the first change below the cursor
  vim.api.nvim_feedkeys(vim.api.nvim_replace_termcodes(keys, true, false, true), 'x', false)
  wait_for(keys, function() return decided >= count end)
  vim.wait(200) -- the proposal's next notification
  table.insert(report.steps, vim.api.nvim_buf_get_lines(0, 0, -1, false))
end
vim.cmd('RewriteTryAnother')
wait_for('another candidate', function() return decided >= 1 end)
vim.wait(200)
report.hunks_after_try = #final.hunks
decide(',a', 2) -- the mapping of :RewriteAccept
decide(',r', 3) -- :RewriteReject
decide(',A', 4) -- :RewriteAcceptAll
wait_for('the end of the review', function() return report.ended ~= nil end)
report.marks_left = #vim.api.nvim_buf_get_extmarks(0, ns, 0, -1, {})
vim.wait(300)
start.finish('finished')
