-- The rewriter's review in Neovim 0.7+ (the protocol: docs/editors.md): a proposal shows as a diff
-- preview in its buffer (the lines a hunk replaces highlighted as DiffDelete, its new lines as
-- virtual lines in DiffAdd below them); nothing changes in the buffer until you accept.
-- Loaded by lsp/editors/nvim.lua and lsp/rewriter.lua, which send `review = true` when
-- vim.g.rewriter_review is true. Commands (and the buffer's mappings while a proposal is shown):
--   :RewriteAccept     <localleader>a   accept the change at (or next after) the cursor
--   :RewriteReject     <localleader>r   reject it
--   :RewriteAcceptAll  <localleader>A   :RewriteRejectAll  <localleader>R
--   :RewriteRefine [instruction]       rewrite the proposal with a follow-up instruction
--   :RewriteTryAnother                 replace the proposal with the model's next candidate answer
--   :RewriteSnippet                    merge a chat model's snippet from the clipboard (register +)
--                                      into this buffer; :[range]RewriteSnippet takes the range's
--                                      lines as the snippet, into the alternate buffer (#)
-- vim.g.rewriter_review_keys = { accept = ..., reject = ..., accept_all = ..., reject_all = ... }
-- sets other mappings (false: none).
local M = { proposals = {} } -- bufnr -> the last rewriter/proposal shown there
local ns = vim.api.nvim_create_namespace('rewriter_review')
local execute -- function(bufnr, command, arguments, on_done), from the setup

local function buffer_of(uri)
  local bufnr = vim.uri_to_bufnr(uri)
  if vim.api.nvim_buf_is_loaded(bufnr) then return bufnr end
end

local function text_lines(text)
  local lines = vim.split(text, '\n', true)
  if lines[#lines] == '' then table.remove(lines) end
  return lines
end

local function render(bufnr, proposal)
  vim.api.nvim_buf_clear_namespace(bufnr, ns, 0, -1)
  local count = vim.api.nvim_buf_line_count(bufnr)
  for _, hunk in ipairs(proposal.hunks) do
    local first, stop = hunk.range.start.line, hunk.range['end'].line
    for line = first, math.min(stop, count) - 1 do
      vim.api.nvim_buf_add_highlight(bufnr, ns, 'DiffDelete', line, 0, -1)
    end
    local virt = {}
    for _, line in ipairs(text_lines(hunk.newText)) do
      table.insert(virt, { { line, 'DiffAdd' } })
    end
    if #virt == 0 then virt = { { { '(lines removed)', 'Comment' } } } end
    -- New lines go above the line after the hunk; after the buffer's last line, below it.
    local above = stop < count
    local row = above and stop or math.max(count - 1, 0)
    vim.api.nvim_buf_set_extmark(bufnr, ns, row, 0, { virt_lines = virt, virt_lines_above = above })
  end
end

local function clear(bufnr)
  M.proposals[bufnr] = nil
  vim.api.nvim_buf_clear_namespace(bufnr, ns, 0, -1)
end

-- The hunk under the cursor, else the next one below it, else the last one.
local function hunk_at_cursor(bufnr, proposal)
  local row = vim.api.nvim_win_get_cursor(0)[1] - 1
  local chosen
  for _, hunk in ipairs(proposal.hunks) do
    local first, stop = hunk.range.start.line, hunk.range['end'].line
    if row >= first and row < math.max(stop, first + 1) or row < first then
      return hunk
    end
    chosen = hunk
  end
  return chosen
end

local function decide(command, one)
  local bufnr = vim.api.nvim_get_current_buf()
  local proposal = M.proposals[bufnr]
  if not proposal then
    return vim.notify('rewriter: no proposal under review in this buffer', vim.log.levels.WARN)
  end
  local argument = { proposal = proposal.id }
  if one then
    local hunk = hunk_at_cursor(bufnr, proposal)
    if not hunk then return end
    argument.hunk = hunk.id
  end
  execute(bufnr, command, { argument }, function(err, result)
    if not err and result and result.status ~= 'ok' then
      vim.notify('rewriter: ' .. result.message, vim.log.levels.WARN)
    end
    if M.on_decided then M.on_decided(err, result) end
  end)
end

local function map_keys(bufnr)
  local keys = vim.g.rewriter_review_keys
  if keys == false then return end
  keys = vim.tbl_extend('keep', keys or {}, { accept = '<localleader>a', reject = '<localleader>r',
    accept_all = '<localleader>A', reject_all = '<localleader>R' })
  local commands = { accept = 'RewriteAccept', reject = 'RewriteReject', accept_all = 'RewriteAcceptAll',
    reject_all = 'RewriteRejectAll' }
  for name, command in pairs(commands) do
    if keys[name] then
      vim.api.nvim_buf_set_keymap(bufnr, 'n', keys[name], '<cmd>' .. command .. '<cr>',
        { noremap = true, silent = true, desc = 'rewriter: ' .. command })
    end
  end
end

local function on_proposal(_, params)
  local bufnr = params and buffer_of(params.uri)
  if not bufnr then return end
  if not M.proposals[bufnr] then map_keys(bufnr) end
  M.proposals[bufnr] = params
  render(bufnr, params)
  if M.on_proposal then M.on_proposal(params) end
end

local function on_ended(_, params)
  local bufnr = params and buffer_of(params.uri)
  if bufnr and M.proposals[bufnr] and M.proposals[bufnr].id == params.id then
    clear(bufnr)
  end
  if params and params.reason ~= 'accepted' and params.reason ~= 'rejected' and params.reason ~= 'superseded' then
    vim.notify('rewriter: ' .. params.message, vim.log.levels.WARN)
  end
  if M.on_ended then M.on_ended(params) end
end

-- The snippet and the buffer it goes into: the range's lines into the alternate buffer (the chat's
-- answer is usually in another window), or the clipboard into this one.
local function snippet_and_target(opts)
  if opts.range > 0 then
    local lines = vim.api.nvim_buf_get_lines(0, opts.line1 - 1, opts.line2, false)
    return table.concat(lines, '\n') .. '\n', vim.fn.bufnr('#')
  end
  return vim.fn.getreg('+'), vim.api.nvim_get_current_buf()
end

-- `run(bufnr, command, arguments, on_done)` sends a workspace/executeCommand to the server.
function M.setup(run)
  execute = run
  vim.lsp.handlers['rewriter/proposal'] = on_proposal
  vim.lsp.handlers['rewriter/proposalEnded'] = on_ended
  local function command(name, fn, opts)
    vim.api.nvim_create_user_command(name, fn, vim.tbl_extend('keep', opts or {}, { desc = 'rewriter: ' .. name }))
  end
  command('RewriteAccept', function() decide('rewriter.acceptHunk', true) end)
  command('RewriteReject', function() decide('rewriter.rejectHunk', true) end)
  command('RewriteAcceptAll', function() decide('rewriter.acceptAll', false) end)
  command('RewriteRejectAll', function() decide('rewriter.rejectAll', false) end)
  command('RewriteRefine', function(opts)
    local bufnr = vim.api.nvim_get_current_buf()
    local proposal = M.proposals[bufnr]
    if not proposal then
      return vim.notify('rewriter: no proposal under review in this buffer', vim.log.levels.WARN)
    end
    local function refine(instruction)
      execute(bufnr, 'rewriter.refine', { { proposal = proposal.id, instruction = instruction, wait = true } },
        M.on_decided)
    end
    if opts.args ~= '' then return refine(opts.args) end
    vim.ui.input({ prompt = 'Refine: ' }, function(instruction)
      if instruction and vim.trim(instruction) ~= '' then refine(instruction) end
    end)
  end, { nargs = '*' })
  command('RewriteTryAnother', function()
    local bufnr = vim.api.nvim_get_current_buf()
    local proposal = M.proposals[bufnr]
    if not proposal then
      return vim.notify('rewriter: no proposal under review in this buffer', vim.log.levels.WARN)
    end
    execute(bufnr, 'rewriter.tryAnother', { { proposal = proposal.id, wait = true } }, function(err, result)
      -- a refusal ("refused": no other candidates from this engine) the server shows itself
      if not err and result and (result.status == 'unchanged' or result.status == 'stale'
          or result.status == 'unknown') then
        vim.notify('rewriter: ' .. result.message, vim.log.levels.WARN)
      end
      if M.on_decided then M.on_decided(err, result) end
    end)
  end)
  command('RewriteSnippet', function(opts)
    local snippet, target = snippet_and_target(opts)
    if target < 0 or vim.trim(snippet) == '' then
      return vim.notify('rewriter: no snippet (or no alternate buffer to merge it into)', vim.log.levels.WARN)
    end
    execute(target, 'rewriter.applySnippet',
      { { uri = vim.uri_from_bufnr(target), snippet = snippet, wait = true } }, M.on_decided)
  end, { range = true })
end

return M
