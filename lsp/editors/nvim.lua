-- The rewriter language server in Neovim 0.7+ with the built-in client: put this in your
-- init.lua (or :luafile it). Optional, before it runs:
--   vim.g.rewriter_cmd = { 'rewriter', 'lsp' }               -- how to start the server
--   vim.g.rewriter_options = { engine = { kind = 'embedded' } } -- initializationOptions
--   vim.g.rewriter_filetypes = { 'python', 'go', ... }
-- Code actions (:lua vim.lsp.buf.code_action()) then offer the preset rewrites. Commands:
--   :Rewrite [instruction]   rewrite the range (default: the function/class at the cursor);
--                            without an instruction it prompts (vim.ui.input)
--   :RewriteFile [instruction], :RewriteCancel
--   vim.g.rewriter_review = true  -- rewrites become proposals you accept or reject (a diff preview;
--                                 -- lsp/editors/nvim_review.lua lists its commands and mappings)
-- On Neovim 0.11+ lsp/rewriter.lua (a vim.lsp.config file) does all this by itself; to use it with
-- this file instead, set vim.g.rewriter_no_autostart = true: the commands work with any client
-- named 'rewriter'.
local M = {}

local function options()
  -- Neovim applies versioned edits (checking the buffer version) though it does not say so.
  return vim.tbl_extend('keep', vim.g.rewriter_options or {},
    { streamEdits = 'always', review = vim.g.rewriter_review == true })
end

local client_id
local function attach(bufnr)
  if not client_id or not vim.lsp.get_client_by_id(client_id) then
    client_id = vim.lsp.start_client({
      name = 'rewriter',
      cmd = vim.g.rewriter_cmd or { 'rewriter', 'lsp' },
      root_dir = vim.fn.getcwd(),
      init_options = options(),
    })
  end
  if client_id then
    vim.lsp.buf_attach_client(bufnr, client_id)
  end
end
M.attach = attach

local function client_for(bufnr)
  local clients = vim.lsp.get_clients and vim.lsp.get_clients({ bufnr = bufnr, name = 'rewriter' })
    or vim.lsp.buf_get_clients(bufnr)
  for _, client in pairs(clients) do
    if client.name == 'rewriter' then
      return client
    end
  end
  vim.notify('rewriter: the language server is not attached to this buffer', vim.log.levels.WARN)
end

local function execute(bufnr, command, arguments, on_done)
  local client = client_for(bufnr)
  if client then
    local request = vim.fn.has('nvim-0.11') == 1 and function(...) return client:request(...) end or client.request
    request('workspace/executeCommand', { command = command, arguments = arguments },
      function(err, result)
        -- The server says how a rewrite ended with window/showMessage: repeating it here
        -- showed every conflict twice.
        if err then
          vim.notify('rewriter: ' .. err.message, vim.log.levels.ERROR)
        end
        if on_done then on_done(err, result) end
      end, bufnr)
  end
end
M.execute = execute

if vim.g.rewriter_review then
  local here = debug.getinfo(1, 'S').source:sub(2):match('(.*/)') or './'
  M.review = dofile(here .. 'nvim_review.lua')
  M.review.setup(execute)
end

local function with_instruction(given, run)
  if given ~= nil and given ~= '' then
    return run(given)
  end
  vim.ui.input({ prompt = 'Rewrite: ' }, function(instruction)
    if instruction and instruction ~= '' then run(instruction) end
  end)
end

vim.api.nvim_create_user_command('Rewrite', function(opts)
  local bufnr = vim.api.nvim_get_current_buf()
  local first, last = opts.line1 - 1, opts.line2
  if opts.range == 0 then -- an empty range: the server takes the function or class around it
    first = vim.api.nvim_win_get_cursor(0)[1] - 1
    last = first
  end
  with_instruction(opts.args, function(instruction)
    execute(bufnr, 'rewriter.rewrite', { {
      uri = vim.uri_from_bufnr(bufnr),
      range = { start = { line = first, character = 0 }, ['end'] = { line = last, character = 0 } },
      instruction = instruction,
      wait = true, -- Neovim's requests have no time limit: answer with the outcome, for on_done
    } }, M.on_done)
  end)
end, { range = true, nargs = '*', desc = 'Rewrite the range (or the function at the cursor)' })

vim.api.nvim_create_user_command('RewriteFile', function(opts)
  local bufnr = vim.api.nvim_get_current_buf()
  with_instruction(opts.args, function(instruction)
    execute(bufnr, 'rewriter.rewriteFile', { { uri = vim.uri_from_bufnr(bufnr), instruction = instruction, wait = true } },
      M.on_done)
  end)
end, { nargs = '*', desc = 'Rewrite the whole buffer' })

vim.api.nvim_create_user_command('RewriteCancel', function()
  local bufnr = vim.api.nvim_get_current_buf()
  execute(bufnr, 'rewriter.cancel', { { uri = vim.uri_from_bufnr(bufnr) } })
end, { desc = 'Stop the rewrite running in this buffer' })

if not vim.g.rewriter_no_autostart then -- set it when vim.lsp.config/enable starts the server
vim.api.nvim_create_autocmd('FileType', {
  pattern = vim.g.rewriter_filetypes or { 'python', 'javascript', 'typescript', 'go', 'rust', 'java', 'c', 'cpp', 'lua' },
  callback = function(args) attach(args.buf) end,
})
end

_G.rewriter = M
return M
