-- Headless Neovim (0.7+) drives the language server like a user: open a file, ask for code
-- actions at the cursor, pick one by title (vim.ui.select overridden), wait for the command to
-- finish, and write what happened to a JSON file. Everything comes in through environment
-- variables (see tests/lsp/test_lsp_nvim.py).
local here = debug.getinfo(1, 'S').source:sub(2):match('(.*/)')
local start = dofile(here .. 'start.lua')({ applied_edits = 0, progress = 0, messages = {} })
local env, report = start.env, start.report

start.edit_file()
local bufnr = vim.api.nvim_get_current_buf()

local apply_edit = vim.lsp.handlers['workspace/applyEdit']
vim.lsp.handlers['workspace/applyEdit'] = function(err, params, ctx, config)
  report.applied_edits = report.applied_edits + 1
  return apply_edit(err, params, ctx, config)
end
vim.lsp.handlers['$/progress'] = function(_, params)
  report.progress = report.progress + 1
  if params.value and params.value.kind == 'end' then
    report.progress_end = params.value.message
  end
end
vim.lsp.handlers['window/showMessage'] = function(_, params)
  table.insert(report.messages, params.message)
end
local client_id
vim.lsp.handlers['workspace/executeCommand'] = function(err, result)
  if result and result.status == 'started' then
    -- A code action's rewrite answers at once; ask for its outcome, as a client that wants it does.
    vim.lsp.get_client_by_id(client_id).request('workspace/executeCommand',
      { command = 'rewriter.wait', arguments = { { job = result.job } } }, nil, bufnr)
    return
  end
  report.error = err and err.message or nil
  report.result = result
  report.done = true
end

client_id = vim.lsp.start_client({
  name = 'rewriter',
  cmd = vim.fn.json_decode(env.REWRITER_NVIM_SERVER),
  root_dir = vim.fn.fnamemodify(env.REWRITER_NVIM_FILE, ':h'),
  init_options = vim.fn.json_decode(env.REWRITER_NVIM_OPTIONS),
})
vim.lsp.buf_attach_client(bufnr, client_id)
start.wait_for('the server did not initialize', function()
  local client = vim.lsp.get_client_by_id(client_id)
  return client ~= nil and client.initialized
end, 60000, 50)

-- Neovim 0.7 offers {client_id, action} pairs, 0.10+ {action = ..., ctx = ...} tables.
local function action_of(item) return item.action or item[2] end
vim.ui.select = function(items, opts, on_choice)
  report.offered = {}
  for _, item in ipairs(items) do
    table.insert(report.offered, action_of(item).title)
  end
  for index, item in ipairs(items) do
    if action_of(item).title == env.REWRITER_NVIM_ACTION then
      return on_choice(item, index)
    end
  end
  on_choice(nil)
  start.finish('no such action')
end

vim.api.nvim_win_set_cursor(0, { tonumber(env.REWRITER_NVIM_LINE), 4 })
vim.lsp.buf.code_action()
start.finish_when_done()
