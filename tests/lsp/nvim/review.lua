-- Headless Neovim with lsp/editors/nvim.lua and the review on: `:RewriteFile` proposes, the preview
-- shows, `:RewriteAccept` / `:RewriteReject` / `:RewriteAcceptAll` decide; writes a JSON report.
local env = vim.fn.environ()
local report = { proposals = 0, decisions = {}, steps = {} }

local function finish(status)
  report.status = status
  report.lines = vim.api.nvim_buf_get_lines(0, 0, -1, false)
  local file = io.open(env.REWRITER_NVIM_OUT, 'w')
  file:write(vim.fn.json_encode(report))
  file:close()
  vim.cmd('qall!')
end

local function wait_for(what, check)
  if not vim.wait(120000, check, 20) then finish('timed out waiting for ' .. what) end
end

vim.g.rewriter_cmd = vim.fn.json_decode(env.REWRITER_NVIM_SERVER)
vim.g.rewriter_options = vim.fn.json_decode(env.REWRITER_NVIM_OPTIONS)
vim.g.rewriter_review = true
vim.g.maplocalleader = ','
vim.cmd('filetype on')
local rewriter = dofile(env.REWRITER_NVIM_SETUP)
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

vim.cmd('edit ' .. vim.fn.fnameescape(env.REWRITER_NVIM_FILE))
wait_for('the server', function()
  for _, client in pairs(vim.lsp.buf_get_clients(0)) do
    if client.name == 'rewriter' and client.initialized then return true end
  end
  return false
end)
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
decide(',a', 1) -- the mapping of :RewriteAccept
decide(',r', 2) -- :RewriteReject
decide(',A', 3) -- :RewriteAcceptAll
wait_for('the end of the review', function() return report.ended ~= nil end)
report.marks_left = #vim.api.nvim_buf_get_extmarks(0, ns, 0, -1, {})
vim.wait(300)
finish('finished')
